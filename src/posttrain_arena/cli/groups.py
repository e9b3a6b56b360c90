"""Command groups shared by several areas (`arena task ...`, `arena collection ...`).

Areas add their commands to these objects from their own modules; `main` mounts them.
"""

from __future__ import annotations

import typer

task_app = typer.Typer(help="Write, check and replay one task package.", no_args_is_help=True)
collection_app = typer.Typer(help="Check and replay a collection.", no_args_is_help=True)
sandbox_app = typer.Typer(help="Sandbox backends: what works here.", no_args_is_help=True)
images_app = typer.Typer(help="Base images for air-gapped hosts.", no_args_is_help=True)
train_app = typer.Typer(help="Post-training runs from a recipe.", no_args_is_help=True)
admin_app = typer.Typer(help="Service administration (users, tokens).", no_args_is_help=True)
result_app = typer.Typer(help="Run results on an Arena server.", no_args_is_help=True)

GROUPS: dict[str, typer.Typer] = {
    "task": task_app,
    "collection": collection_app,
    "sandbox": sandbox_app,
    "images": images_app,
    "train": train_app,
    "admin": admin_app,
    "result": result_app,
}
