"""Batched generation gives every request what it would get alone, in any batch."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from posttrain_arena.models import SamplingParams

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from posttrain_arena.models.batching import BatchedGenerator  # noqa: E402
from posttrain_arena.models.transformers_local import TransformersChatModel  # noqa: E402

from .tinyqwen import build_model, build_tokenizer  # noqa: E402

Result = tuple[list[int], list[float]]


@pytest.fixture(scope="module")
def serial() -> TransformersChatModel:
    """The reference: each turn alone through transformers' generate."""
    tokenizer = build_tokenizer()
    return TransformersChatModel(build_model(tokenizer), tokenizer, name="tiny", max_batch=None)


@pytest.fixture(scope="module")
def prompts(serial: TransformersChatModel) -> list[list[int]]:
    """Prompts of different lengths, so that batches are left-padded."""
    users = ["ls", "cat hello.txt and then echo hello > out.txt", "python3 -c 1+1",
             "Run one command per turn with the bash tool.", "echo"]
    return [serial.prompt_ids([{"role": "user", "content": u}]) for u in users]


def batcher_for(client: TransformersChatModel, rows: int,
                eos_ids: Sequence[int] | None = None) -> BatchedGenerator:
    """A batcher that waits until `rows` requests are pending, so they run as one batch."""
    return BatchedGenerator(client.model, eos_ids=eos_ids or client.eos_ids,
                            pad_id=client.pad_id, max_batch=rows, gather_sec=30.0)


def in_one_batch(batcher: BatchedGenerator, prompts: Sequence[list[int]],
                 samplings: Sequence[SamplingParams]) -> list[Result]:
    """Generate every (prompt, sampling) from its own thread, as concurrent trials do,
    queued in order: the first `max_batch` make the first batch (the batcher gathers
    until it is full), the others join as rows end."""
    results: list[Any] = [None] * len(prompts)
    passes = batcher.stats.passes

    def run(i: int) -> None:
        try:
            results[i] = batcher.generate(prompts[i], samplings[i])
        except Exception as exc:  # handed back to the test thread
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
    for i, t in enumerate(threads):
        t.start()
        if i + 1 < batcher.max_batch:
            _until(lambda i=i: batcher.waiting > i)
        elif i + 1 == batcher.max_batch:  # the first batch is full: its prefill begins
            _until(lambda: batcher.stats.passes > passes)
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a generate call never returned"
    return results


def _until(condition: Any, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "a request was never queued"
        time.sleep(0.001)


def forward_logprobs(model: Any, ids: list[int], temperature: float) -> Any:
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float() / temperature
    return torch.log_softmax(logits, dim=-1)


def test_greedy_batch_equals_transformers_generate(serial: TransformersChatModel,
                                                   prompts: list[list[int]]) -> None:
    greedy = SamplingParams(temperature=0, max_new_tokens=16)
    reference = [serial.generate(p, greedy) for p in prompts]
    batcher = batcher_for(serial, len(prompts))
    batched = in_one_batch(batcher, prompts, [greedy] * len(prompts))
    assert batcher.stats.widest == len(prompts)
    for (ids, lps), (ref_ids, ref_lps) in zip(batched, reference, strict=True):
        assert ids == ref_ids
        assert lps == pytest.approx(ref_lps, abs=1e-5)


def test_seeded_sample_is_the_same_alone_and_in_any_batch(serial: TransformersChatModel,
                                                          prompts: list[list[int]]) -> None:
    """The same seed gives the same tokens whatever else is in the batch (other seeds,
    greedy rows, other positions), and the logprobs are those of a plain forward pass."""
    mine = SamplingParams(temperature=0.8, top_p=0.9, max_new_tokens=16, seed=7)
    target = prompts[1]
    alone_batcher = batcher_for(serial, 1)
    alone = alone_batcher.generate(target, mine)
    assert alone_batcher.stats.widest == 1
    others = [SamplingParams(temperature=0, max_new_tokens=5),
              SamplingParams(temperature=1.0, max_new_tokens=16, seed=8),
              SamplingParams(temperature=0.8, top_p=0.9, max_new_tokens=16, seed=99)]
    for position in (0, 2, 3):
        batch = [p for i, p in enumerate(prompts) if i != 1][:3]
        batch.insert(position, target)
        samplings = list(others)
        samplings.insert(position, mine)
        batcher = batcher_for(serial, len(batch))
        got = in_one_batch(batcher, batch, samplings)[position]
        assert batcher.stats.widest == len(batch)
        assert got[0] == alone[0]
        assert got[1] == pytest.approx(alone[1], abs=1e-5)
    other_seed = batcher_for(serial, 1).generate(target, mine.model_copy(update={"seed": 8}))
    assert other_seed[0] != alone[0]  # the seed, not the prompt, picked the sample
    ids = target + alone[0]
    lp = forward_logprobs(serial.model, ids, 0.8)
    for i, (tok, recorded) in enumerate(zip(alone[0], alone[1], strict=True)):
        assert recorded == pytest.approx(float(lp[len(target) + i - 1, tok]), abs=1e-5)


def test_top_p_keeps_samples_in_the_nucleus(serial: TransformersChatModel,
                                            prompts: list[list[int]]) -> None:
    """Every sampled token lies in the smallest set of top tokens holding top_p of the
    mass, and its logprob is still the untruncated one."""
    top_p = 0.3
    samplings = [SamplingParams(temperature=1.0, top_p=top_p, max_new_tokens=12, seed=s)
                 for s in range(len(prompts))]
    batched = in_one_batch(batcher_for(serial, len(prompts)), prompts, samplings)
    for prompt, (ids, lps) in zip(prompts, batched, strict=True):
        lp = forward_logprobs(serial.model, prompt + ids, 1.0)
        for i, tok in enumerate(ids):
            row = lp[len(prompt) + i - 1]
            probs, order = torch.sort(row.exp(), descending=True)
            n = int(((torch.cumsum(probs, -1) - probs) < top_p).sum())
            assert tok in order[: max(1, n)].tolist()
            assert lps[i] == pytest.approx(float(row[tok]), abs=1e-5)


def test_rows_end_on_their_own(serial: TransformersChatModel,
                               prompts: list[list[int]]) -> None:
    """Each row stops at its own end token (included) or its own max_new_tokens, while
    the rows beside it carry on."""
    greedy = SamplingParams(temperature=0, max_new_tokens=20)
    reference = [serial.generate(p, greedy)[0] for p in prompts[:3]]
    stop = reference[0][2]  # made an end token: row 0 must stop at its third token
    limits = [20, 20, 7]
    batcher = batcher_for(serial, 3, eos_ids=[stop])
    got = in_one_batch(batcher, prompts[:3],
                       [greedy.model_copy(update={"max_new_tokens": n}) for n in limits])
    for (ids, _), ref, limit in zip(got, reference, limits, strict=True):
        expected = ref[: ref.index(stop) + 1] if stop in ref else ref
        assert ids == expected[:limit]
    assert got[0][0][-1] == stop and len(got[0][0]) <= 3
    assert len(got[2][0]) == 7 or got[2][0][-1] == stop


def test_a_request_joins_a_running_batch_and_gets_what_it_gets_alone(
        serial: TransformersChatModel, prompts: list[list[int]]) -> None:
    """Three requests, room for two: the third takes the place of the first as soon as
    that one ends, while the second is still decoding, and its answer is unchanged."""
    short = SamplingParams(temperature=0, max_new_tokens=3)
    long = SamplingParams(temperature=0.9, max_new_tokens=30, seed=4)
    late = SamplingParams(temperature=0.9, top_p=0.8, max_new_tokens=12, seed=5)
    alone = [batcher_for(serial, 1).generate(p, s)
             for p, s in zip(prompts[:3], (short, long, late), strict=True)]
    batcher = batcher_for(serial, 2)
    got = in_one_batch(batcher, prompts[:3], [short, long, late])
    for (ids, lps), (ref_ids, ref_lps) in zip(got, alone, strict=True):
        assert ids == ref_ids
        assert lps == pytest.approx(ref_lps, abs=1e-5)
    assert batcher.stats.widest == 2
    # Waiting for the second row to end would cost len(long) + len(late) forward passes.
    assert batcher.stats.passes < len(alone[1][0]) + len(alone[2][0])


def test_the_cache_narrows_when_the_longest_row_leaves(
        serial: TransformersChatModel, prompts: list[list[int]]) -> None:
    """A short row that outlives a long one stops attending over (and copying) the long
    row's padding: once the long row has left, no step reads a padded cell. Before, the
    batch only widened, and in the micro evaluation four cells in five were padding."""
    long_prompt = [tok for p in prompts for tok in p]  # every prompt, end to end
    short_prompt = min(prompts, key=len)
    never = [-1]  # no token ends a row: both run to their max_new_tokens
    quick = SamplingParams(temperature=0, max_new_tokens=2)
    slow = SamplingParams(temperature=0.9, max_new_tokens=20, seed=3)
    alone = batcher_for(serial, 1, eos_ids=never).generate(short_prompt, slow)
    batcher = batcher_for(serial, 2, eos_ids=never)
    got = in_one_batch(batcher, [long_prompt, short_prompt], [quick, slow])
    assert len(got[0][0]) == 2 and got[1][0] == alone[0]
    assert got[1][1] == pytest.approx(alone[1], abs=1e-5)
    gap = len(long_prompt) - len(short_prompt)
    # Padded cells: the shared prefill and the one step both rows took, nothing after.
    assert batcher.stats.padding <= 2 * gap
    assert batcher.stats.cells > batcher.stats.padding


def test_a_row_out_of_time_ends_early(serial: TransformersChatModel,
                                      prompts: list[list[int]]) -> None:
    sampled = SamplingParams(temperature=1.0, max_new_tokens=1500, seed=1)
    got = in_one_batch(batcher_for(serial, 2), prompts[:2],
                       [sampled.model_copy(update={"max_time_sec": 0.01}),
                        sampled.model_copy(update={"max_new_tokens": 30})])
    eos = set(serial.eos_ids)
    timed, free = got[0][0], got[1][0]
    assert 0 < len(timed) < 1500 and (timed[-1] not in eos or len(timed) < 1500)
    assert len(free) == 30 or free[-1] in eos


def test_a_bad_prompt_fails_its_caller_only_and_the_next_batch_runs(
        serial: TransformersChatModel, prompts: list[list[int]]) -> None:
    greedy = SamplingParams(temperature=0, max_new_tokens=4)
    batcher = batcher_for(serial, 2)
    bad = [10**6]  # not a token of the vocabulary: the embedding lookup raises
    got = in_one_batch(batcher, [bad, prompts[0]], [greedy, greedy])
    # Each prompt is prefilled alone: the bad one fails, its neighbour is untouched.
    assert isinstance(got[0], IndexError)
    assert got[1] == batcher_for(serial, 1).generate(prompts[0], greedy)
    after = batcher_for(serial, 1).generate(prompts[0], greedy)
    reference = serial.generate(prompts[0], greedy)
    assert after[0] == reference[0]
    assert after[1] == pytest.approx(reference[1], abs=1e-5)
    # Joining a running batch, a bad prompt fails alone; the rows decoding carry on.
    short, long = greedy.model_copy(update={"max_new_tokens": 2}), greedy.model_copy(
        update={"max_new_tokens": 12})
    got = in_one_batch(batcher_for(serial, 2), [prompts[0], prompts[1], bad],
                       [short, long, greedy])
    assert isinstance(got[2], IndexError)
    # Exactly what the row gets alone; transformers' own generate (other kernels) agrees
    # on the tokens and, to float precision, on the logprobs.
    assert got[1] == batcher_for(serial, 1).generate(prompts[1], long)
    reference = serial.generate(prompts[1], long)
    assert got[1][0] == reference[0]
    assert got[1][1] == pytest.approx(reference[1], abs=1e-5)


def test_chat_model_batches_concurrent_turns(serial: TransformersChatModel,
                                             prompts: list[list[int]]) -> None:
    """The client's default path is the batcher, and its turns equal the reference."""
    client = TransformersChatModel(serial.model, serial.tokenizer, name="tiny", max_batch=8)
    assert client.batcher is not None
    client.batcher.gather_sec = 30.0
    client.batcher.max_batch = len(prompts)
    greedy = SamplingParams(temperature=0, max_new_tokens=10)
    got = in_one_batch(client.batcher, prompts, [greedy] * len(prompts))
    assert client.batcher.stats.widest == len(prompts)
    assert [ids for ids, _ in got] == [serial.generate(p, greedy)[0] for p in prompts]


def test_bad_settings_are_refused(serial: TransformersChatModel) -> None:
    with pytest.raises(ValueError, match="max_batch"):
        BatchedGenerator(serial.model, eos_ids=serial.eos_ids, pad_id=0, max_batch=0)
    with pytest.raises(ValueError, match="non-empty"):
        BatchedGenerator(serial.model, eos_ids=serial.eos_ids, pad_id=0).generate(
            [], SamplingParams())


def test_a_row_gets_the_same_numbers_alone_and_in_any_batch(
        serial: TransformersChatModel, prompts: list[list[int]]) -> None:
    """Bit-identical: the same ids and the same logprobs, not merely close ones, whatever
    rows share the batch (their number, lengths, samplings, the row's place, rows that
    join or leave while it decodes). Which rows share a batch depends on timing; were a
    row's numbers to depend on it, a sampled token and a trial's verdict could too."""
    target = prompts[3]  # the longest: its neighbours are left-padded, and it is not
    mine = SamplingParams(temperature=1.0, max_new_tokens=24, seed=11)
    alone = batcher_for(serial, 1).generate(target, mine)
    shorter = [p for p in prompts if len(p) < len(target)]
    longer = [p + p for p in prompts[:2]]  # longer than the target: it is padded itself
    compositions = [
        ([target, shorter[0]], 0),
        ([shorter[1], target], 1),
        ([longer[0], shorter[0], target, longer[1]], 2),
        ([*shorter, target, *longer], len(shorter)),
    ]
    for batch, position in compositions:
        samplings = [SamplingParams(temperature=0.7, max_new_tokens=3 + 5 * i, seed=i)
                     for i in range(len(batch))]
        samplings[position] = mine
        batcher = batcher_for(serial, len(batch))
        got = in_one_batch(batcher, batch, samplings)[position]
        assert batcher.stats.widest == len(batch)
        assert got == alone, f"composition {len(batch)} rows, place {position}"
    # Joining a batch already decoding (room for two: the target waits for a place).
    batcher = batcher_for(serial, 2)
    got = in_one_batch(batcher, [longer[0], shorter[0], target],
                       [SamplingParams(temperature=0, max_new_tokens=30),
                        SamplingParams(temperature=0, max_new_tokens=2), mine])
    assert got[2] == alone
