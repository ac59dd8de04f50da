"""Lambda handler assets leave Python bytecode out, so a __pycache__ in the working tree never
changes the asset's hash (its S3 key, and so the template) or ships in the bundle."""

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_

from fmcluster_cdk.constructs.lambda_code import handler_code
from fmcluster_cdk.synthesis import new_app


def _asset_hashes(handler: Path, outdir: Path) -> list[str]:
    app = new_app(str(outdir))
    stack = cdk.Stack(app, "s")
    lambda_.Function(stack, "F", runtime=lambda_.Runtime.PYTHON_3_14, handler="index.handler",
                     code=handler_code(handler))
    app.synth()
    return sorted(p.name for p in outdir.iterdir() if p.name.startswith("asset."))


def test_bytecode_changes_neither_hash_nor_bundle(tmp_path):
    handler = tmp_path / "handler"
    handler.mkdir()
    (handler / "index.py").write_text("def handler(event, context):\n    return {}\n")
    clean = _asset_hashes(handler, tmp_path / "clean")
    (handler / "__pycache__").mkdir()
    (handler / "__pycache__" / "index.cpython-311.pyc").write_bytes(b"\x00bytecode")
    (handler / "stray.pyc").write_bytes(b"\x00bytecode")
    assert _asset_hashes(handler, tmp_path / "with-bytecode") == clean
    (staged,) = (tmp_path / "with-bytecode").glob("asset.*")
    assert sorted(p.name for p in staged.rglob("*")) == ["index.py"]
