"""Write one CRD version's openAPIV3Schema as a schema file of this folder, the way every file here
is made (tests/kubernetes/test_crd_schemas.py reads them): `group`, `version`, `kind`, `scope`, the `schema`
itself unchanged, and `$comment` with its provenance; JSON with one-space indents and sorted keys.

    git -C MIRROR show REF:PATH | python tests/data/crds/convert.py VERSION "SOURCE"

reads the CRD (a YAML stream: the CustomResourceDefinition among its documents) from stdin and
writes GROUP_PLURAL_VERSION.json beside this script; SOURCE says where the CRD came from
(repository, ref and path), as the `$comment` names it. Used for every file here: e.g. Kueue's
ClusterQueue from kubernetes-sigs/kueue v0.18.3 config/components/crd/bases/
kueue.x-k8s.io_clusterqueues.yaml, and the MPIJob, PyTorchJob and LeaderWorkerSet files (their
`$comment`s give the exact commands' sources).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent


def convert(text: str, version: str, source: str) -> tuple[str, str]:
    """(file name, file text) of `version` of the CRD in the YAML stream `text`."""
    (crd,) = [d for d in yaml.safe_load_all(text) if d and d.get("kind") == "CustomResourceDefinition"]
    return convert_crd(crd, version, source)


def convert_crd(crd: dict, version: str, source: str) -> tuple[str, str]:
    """(file name, file text) of `version` of the CustomResourceDefinition `crd`."""
    spec = crd["spec"]
    (served,) = [v for v in spec["versions"] if v["name"] == version]
    group, kind = spec["group"], spec["names"]["kind"]
    document = {
        "$comment": f"openAPIV3Schema of {group}/{version} {kind}, from {source} "
                    "(tests/kubernetes/test_crd_schemas.py validates fmcluster's manifests against it)",
        "group": group, "kind": kind, "schema": served["schema"]["openAPIV3Schema"], "scope": spec["scope"],
        "version": version}
    return f"{group}_{spec['names']['plural']}_{version}.json", json.dumps(document, indent=1, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    name, text = convert(sys.stdin.read(), *argv)
    (HERE / name).write_text(text, encoding="utf-8")
    print(HERE / name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
