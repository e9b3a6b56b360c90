"""Organizer gates: which contributed tasks are sound, learnable and safe to train on.

    Collection + base model --gate--> TaskEvidence per package

    from posttrain_arena.gates import gate_collection
    report = gate_collection(root, runner, model, model_spec="scripted:m.yaml", k=4,
                             reruns=3, jobs=2, records_root=Path("records"))

Modules: `evidence` (the TaskEvidence record and its store, keyed by package content
hash + harness version), `policy` (GatePolicy: which gates and thresholds decide
eligibility), `probes` (known-bad perturbations of the oracle's final state), `run`
(the gate run over a collection).
"""

from posttrain_arena.gates.evidence import (
    EvidenceStore,
    GateName,
    GateStatus,
    TaskEvidence,
    Verdict,
    harness_version,
)
from posttrain_arena.gates.policy import DEFAULT_POLICY, GatePolicy
from posttrain_arena.gates.run import GateReport, gate_collection

__all__ = [
    "DEFAULT_POLICY",
    "EvidenceStore",
    "GateName",
    "GatePolicy",
    "GateReport",
    "GateStatus",
    "TaskEvidence",
    "Verdict",
    "gate_collection",
    "harness_version",
]
