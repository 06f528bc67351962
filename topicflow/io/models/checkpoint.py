"""Driver checkpoints of long fits: the model state plus where the loop stands, written atomically.

A checkpoint is a saved model (:mod:`topicflow.io.models.store`) whose ``model.json`` carries a
``checkpoint`` entry: the fit method, the position reached (iteration, or pass and minibatch), the
trace so far and a fingerprint of the settings and the corpus. Because every pass of every fit is a
pure function of the state and the position, resuming from it ends with the model an uninterrupted
run would give.

Layout: ``CHECKPOINT/a`` and ``CHECKPOINT/b`` hold two saved models and ``CHECKPOINT/latest.json``
names the newer one. A write fills the other slot, then rewrites ``latest.json`` atomically, so a
driver killed at any moment leaves a complete checkpoint behind.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from topicflow.errors import InvalidParameterError
from topicflow.io._atomic import atomic_write_json, read_json
from topicflow.io.models.store import SavedModel, load_model, save_model
from topicflow.models.common.vocabulary import Vocabulary
from topicflow.models.lda.state import LDAState


def default_checkpoint_path(model_path: Path) -> Path:
    """Where ``fit --checkpoint-every`` keeps its checkpoint: ``<MODEL>.checkpoint`` beside the model."""
    model_path = Path(model_path)
    return model_path.with_name(model_path.name + ".checkpoint")


@dataclass(frozen=True)
class Checkpoint:
    """A driver state to resume from.

    Attributes
    ----------
    state : LDAState
    position : dict
        Where the loop stands, e.g. ``{"iteration": 7}`` or ``{"epoch": 0, "minibatch": 12, "t": 12}``.
    trace : list of dict
        Records of the iterations or minibatches done so far.
    fingerprint : dict
        Settings and corpus identity the checkpoint was written for.
    """

    state: LDAState
    position: dict[str, Any]
    trace: list[dict[str, Any]]
    fingerprint: dict[str, Any]


def write_checkpoint(
    path: Path, checkpoint: Checkpoint, vocabularies: Mapping[str, Vocabulary]
) -> None:
    """Replace the checkpoint at ``path`` atomically (see the module docstring for the layout)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    latest = path / "latest.json"
    slot = "b" if latest.exists() and read_json(latest).get("slot") == "a" else "a"
    shutil.rmtree(path / slot, ignore_errors=True)
    info = {
        "kind": "checkpoint",
        "checkpoint": {
            "position": checkpoint.position, "trace": checkpoint.trace, "fingerprint": checkpoint.fingerprint,
        },
    }
    save_model(path / slot, SavedModel(checkpoint.state, dict(vocabularies), info))
    atomic_write_json(latest, {"slot": slot, "position": checkpoint.position})


def read_checkpoint(path: Path, fingerprint: Mapping[str, Any]) -> Checkpoint | None:
    """The checkpoint at ``path``, or None when there is none.

    Raises
    ------
    InvalidParameterError
        The checkpoint was written for other settings or another corpus; the message names the
        differing keys.
    """
    path = Path(path)
    if not (path / "latest.json").exists():
        return None
    saved = load_model(path / read_json(path / "latest.json")["slot"])
    payload = saved.info.get("checkpoint")
    if payload is None:
        raise InvalidParameterError(
            f"{str(path)!r} is not a topicflow checkpoint; remove it or pass another --checkpoint path.",
            path=str(path),
        )
    differing = sorted(
        key for key in set(fingerprint) | set(payload["fingerprint"])
        if _jsonable(fingerprint.get(key)) != payload["fingerprint"].get(key)
    )
    if differing:
        raise InvalidParameterError(
            f"checkpoint {str(path)!r} was written by a fit with other {', '.join(differing)}; rerun with the "
            "same store and settings to resume, or drop --resume (the checkpoint is then overwritten).",
            path=str(path),
        )
    return Checkpoint(saved.state, dict(payload["position"]), list(payload["trace"]), dict(payload["fingerprint"]))


def remove_checkpoint(path: Path) -> None:
    """Delete the checkpoint once the fit it belongs to has saved its model."""
    shutil.rmtree(Path(path), ignore_errors=True)


def _jsonable(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists), for fingerprint comparison."""
    import json

    return json.loads(json.dumps(value))
