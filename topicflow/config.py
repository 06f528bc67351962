"""Infrastructure defaults registered under ``topicflow.*`` in ``dask.config``."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import dask.config
import yaml

_DEFAULTS_FILE = Path(__file__).with_name("topicflow.yaml")

with open(_DEFAULTS_FILE, encoding="utf-8") as _handle:
    _defaults = yaml.safe_load(_handle)
dask.config.update_defaults(_defaults)


def get(key: str, default: Any = None) -> Any:
    """A ``topicflow.<key>`` setting from dask.config."""
    return dask.config.get(f"topicflow.{key}", default=default)
