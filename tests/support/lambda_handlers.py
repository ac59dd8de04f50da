"""A Lambda handler of fmcluster_cdk (fmcluster_cdk/constructs/GROUP/handlers/NAME/index.py) loaded as
the Lambda runtime loads it: the asset's root, the handler's directory, on sys.path, so that its
`import training_plans` (a link there to fmcluster_cdk/constructs/handler_lib/) finds the module."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load(index: Path, name: str) -> ModuleType:
    """The handler `index` (its index.py) as module `name`, registered in sys.modules (its
    dataclasses look their module up)."""
    root = str(index.parent)
    if root not in sys.path:
        sys.path.append(root)
    spec = importlib.util.spec_from_file_location(name, index)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
