"""Driver checkpoints of long fits: the model state plus where the loop stands, written atomically.

A checkpoint is a saved model (:mod:`topicflow.io.models.store`) whose ``model.json`` carries a
``checkpoint`` entry: the fit method, the position reached (iteration, or pass and minibatch), the
trace so far and a fingerprint of the settings and the corpus. Because every pass of every fit is a
pure function of the state and the position, resuming from it ends with the model an uninterrupted
run would give.

Layout: ``CHECKPOINT/a`` and ``CHECKPOINT/b`` hold two saved models and ``CHECKPOINT/latest.json``
names the newer one. A write fills the other slot, then rewrites ``latest.json`` atomically, so a
driver killed at any moment leaves a complete checkpoint behind.

On object storage (a URL, docs/storage.md) the layout is the same: the slot is a model saved there
(its ``versions.json`` put last), and ``latest.json`` is replaced by one PUT, which is atomic there
too. Paths may be given as a :class:`~pathlib.Path` that ``pathlib`` collapsed from a URL
(``s3:/b/m.checkpoint``); :func:`~topicflow.io.output_paths.output_location` recognizes them.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, cast

import numpy as np

from topicflow.errors import InvalidParameterError, ModelFormatError, ModelNotFoundError
from topicflow.io._atomic import atomic_write_json, disk_full_guard, read_json
from topicflow.io.models.info import ModelInfo
from topicflow.io.models.store import SavedModel, load_model, save_model
from topicflow.io.output_paths import output_location, remove_output, write_output_json
from topicflow.io.storage import Location, StoragePath
from topicflow.models.common.vocabulary import Vocabulary
from topicflow.models.lda.state import LDAState

#: Entries of which a checkpoint directory holds at least one (``--overwrite`` replaces only such a directory).
CHECKPOINT_MARKERS = ("latest.json", "a", "b")


def default_checkpoint_path(model_path: Path | str | StoragePath) -> Location:
    """Where ``fit --checkpoint-every`` keeps its checkpoint: ``<MODEL>.checkpoint`` beside the model.

    Parameters
    ----------
    model_path : path or URL

    Returns
    -------
    Path or StoragePath
        A URL for a model on object storage.
    """
    location = output_location(model_path)
    if isinstance(location, StoragePath):
        return StoragePath(location.url + ".checkpoint")
    return location.with_name(location.name + ".checkpoint")


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
    sampler_state : dict of str to ndarray
        The exact state of a method whose model is more than ``state`` (the collapsed variational
        methods keep their expected counts here, as a saved model does); empty for the others.
    """

    state: LDAState
    position: dict[str, Any]
    trace: list[dict[str, Any]]
    fingerprint: dict[str, Any]
    sampler_state: dict[str, np.ndarray] = field(default_factory=dict)


def write_checkpoint(
    path: Path | StoragePath, checkpoint: Checkpoint, vocabularies: Mapping[str, Vocabulary]
) -> None:
    """Replace the checkpoint at ``path`` atomically (see the module docstring for the layout).

    Parameters
    ----------
    path : Path or StoragePath
        The checkpoint directory (a URL on object storage).
    checkpoint : Checkpoint
    vocabularies : mapping of str to Vocabulary
    """
    path = output_location(path)
    info = ModelInfo(kind="checkpoint", extra={"checkpoint": {
        "position": checkpoint.position, "trace": checkpoint.trace, "fingerprint": checkpoint.fingerprint,
    }})
    saved = SavedModel(checkpoint.state, dict(vocabularies), info, sampler_state=dict(checkpoint.sampler_state))
    if isinstance(path, StoragePath):
        slot = "b" if _latest_slot(path) == "a" else "a"
        remove_output(path / slot)
        # save_model and load_model take URLs too (a StoragePath), though annotated with Path.
        save_model(cast(Path, path / slot), saved)
        write_output_json(path / "latest.json", {"slot": slot, "position": checkpoint.position})  # one PUT
        return
    _write_local_checkpoint(path, saved, checkpoint.position)


def _write_local_checkpoint(path: Path, saved: SavedModel, position: Mapping[str, Any]) -> None:
    """Fill the slot ``latest.json`` does not name, then point ``latest.json`` at it.

    A failure (a full disk above all) removes the new slot and, on the first checkpoint, the directory
    this call created, so the checkpoint a rerun resumes from is the previous one, as it was.
    """
    created = not path.exists()
    path.mkdir(parents=True, exist_ok=True)
    previous = _latest_slot(path)
    slot = "b" if previous == "a" else "a"
    unchanged = ("nothing was changed: the previous checkpoint is still the one a rerun resumes from."
                 if previous is not None else "no checkpoint was written; a rerun starts from the beginning.")
    with disk_full_guard(path, what="checkpoint", unchanged=unchanged):
        remove_output(path / slot)
        try:
            save_model(path / slot, saved)
            atomic_write_json(path / "latest.json", {"slot": slot, "position": dict(position)})
        except BaseException:
            if _latest_slot(path) != slot:
                shutil.rmtree(path / slot, ignore_errors=True)
            if created and not any(path.iterdir()):
                path.rmdir()
            raise


def read_checkpoint(path: Path | StoragePath, fingerprint: Mapping[str, Any]) -> Checkpoint | None:
    """The checkpoint at ``path``, validated, or None when there is none.

    The slot ``latest.json`` names is read as a model (so its arrays are validated as every model's
    are, see :func:`topicflow.io.models.store.read_model_dir`), and its position and topic count must
    agree with ``latest.json`` and the settings it was written for.

    Parameters
    ----------
    path : Path or StoragePath
        The checkpoint directory (a URL on object storage).
    fingerprint : mapping
        Settings and corpus identity of the fit that would resume.

    Returns
    -------
    Checkpoint or None
        None when ``path`` holds no ``latest.json``.

    Raises
    ------
    InvalidParameterError
        The checkpoint was written for other settings or another corpus; the message names the
        differing keys.
    ModelFormatError
        The checkpoint is damaged: ``latest.json`` unreadable or naming a missing slot, the slot's
        model damaged, or its position or topic count inconsistent; the message says to delete it.
    """
    path = output_location(path)
    if not (path / "latest.json").exists():
        return None
    slot = _latest_slot(path)
    if slot is None:
        raise damaged_checkpoint(path, "latest.json", "latest.json is not valid JSON naming slot 'a' or 'b'")
    try:
        saved = load_model(cast(Path, path / slot))
    except ModelNotFoundError as exc:
        raise damaged_checkpoint(path, slot, f"latest.json names slot {slot!r}, which holds no model") from exc
    except ModelFormatError as exc:
        raise damaged_checkpoint(path, exc.field or slot, exc.problem or str(exc)) from exc
    payload = saved.info.extra.get("checkpoint")
    if payload is None:
        raise InvalidParameterError(
            f"{str(path)!r} is not a topicflow checkpoint; remove it or pass another --checkpoint path.",
            path=str(path),
        )
    _check_consistent(path, slot, payload, saved.state, read_json(path / "latest.json").get("position"))
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
    return Checkpoint(saved.state, dict(payload["position"]), list(payload["trace"]), dict(payload["fingerprint"]),
                      dict(saved.sampler_state))


def damaged_checkpoint(path: Location, field: str, problem: str) -> ModelFormatError:
    """The error of a checkpoint that cannot be resumed from: where, what is wrong, and what to do.

    Parameters
    ----------
    path : Path or StoragePath
        The checkpoint directory.
    field : str
        What is inconsistent (``"latest.json"``, a slot, or a field of the slot's model).
    problem : str
        What is wrong, as a clause naming its subject (``"latest.json is not valid JSON"``).

    Returns
    -------
    ModelFormatError
        Whose message says to delete the checkpoint or fit without ``--resume``.
    """
    return ModelFormatError(
        f"checkpoint {str(path)!r} is damaged: {problem}; delete it, or run the fit without --resume "
        "(which starts over and replaces it).",
        path=str(path),
        field=field,
        problem=problem,
    )


def _latest_slot(path: Location) -> str | None:
    """The slot ``latest.json`` names, or None when it is missing, unreadable or names no slot."""
    try:
        latest = read_json(path / "latest.json")
    except (OSError, ValueError):
        return None
    slot = latest.get("slot") if isinstance(latest, dict) else None
    return slot if slot in ("a", "b") else None


def _check_consistent(path: Location, slot: str, payload: Any, state: LDAState, latest_position: Any) -> None:
    """The slot's ``checkpoint`` entry is complete and agrees with ``latest.json`` and its own state."""
    kinds = {"position": dict, "trace": list, "fingerprint": dict}
    if not isinstance(payload, dict) or any(not isinstance(payload.get(key), kind) for key, kind in kinds.items()):
        raise damaged_checkpoint(path, f"{slot}/model.json", f"{slot}/model.json lacks the position, trace or "
                                                             "fingerprint of the checkpoint")
    if latest_position != payload["position"]:
        raise damaged_checkpoint(path, "latest.json", f"latest.json gives position {latest_position!r} but slot "
                                                      f"{slot!r} holds position {payload['position']!r}")
    settings = payload["fingerprint"].get("settings")
    n_topics = settings.get("n_topics") if isinstance(settings, dict) else None
    if n_topics is not None and n_topics != state.n_topics:
        raise damaged_checkpoint(path, "n_topics", f"n_topics is {n_topics!r} in the settings but the saved state "
                                                   f"has {state.n_topics} topics")


def remove_checkpoint(path: Path | StoragePath) -> None:
    """Delete the checkpoint once the fit it belongs to has saved its model.

    Parameters
    ----------
    path : Path or StoragePath
    """
    remove_output(path)


def _jsonable(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists), for fingerprint comparison."""
    import json

    return json.loads(json.dumps(value))
