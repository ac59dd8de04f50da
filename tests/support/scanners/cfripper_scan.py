"""Run by the scanners' own Python (.venv-scan, tests/cdk/test_scanners.py), not by the project's:
cfripper's rules over every template named on the command line, in one process. Prints one JSON
object: template path -> {"failures": [{"rule", "resource_ids", "reason"}]} or {"error": why it
could not parse the template} (pycfmodel refuses some valid templates)."""

import json
import logging
import sys

import pycfmodel
from cfripper.cli import analyse_template, init_cfripper


def main(paths: list[str]) -> None:
    logging.disable(logging.CRITICAL)  # pycfmodel logs every unresolved token
    config, processor = init_cfripper(None, None, sys.argv[1], None)
    found: dict[str, dict] = {}
    for path in paths:
        with open(path) as f:
            body = json.load(f)
        try:
            model = pycfmodel.parse(body).resolve()
        except Exception as exc:  # noqa: BLE001 - any parse failure: reported, the test decides
            found[path] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
            continue
        result = analyse_template(model, processor, config)
        found[path] = {"failures": [{"rule": f.rule, "resource_ids": sorted(f.resource_ids or []), "reason": f.reason}
                                    for f in result.failures]}
    json.dump(found, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[2:])
