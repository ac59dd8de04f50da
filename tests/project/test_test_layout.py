"""The tests are laid out like the packages: every test module lives in a group folder (a package)
that names a package of fmcluster/ (facts, spec, model, node, kubernetes, observability, plan,
deploy, kits), `cdk` (fmcluster_cdk) or `project` (checks of the whole repository). What several
modules share lives in tests/support/, which holds no test module; no test module imports
another (read with ast: every import, at module level or inside a function)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import ROOT, SUPPORT

TESTS = ROOT / "tests"
PACKAGES = sorted(p.parent.name for p in (ROOT / "fmcluster").glob("*/__init__.py"))
GROUPS = {*PACKAGES, "cdk", "project"}
TEST_FILE_PATTERNS = ("test_*.py", "*_test.py")  # what pytest collects (python_files' default)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def collected_test_modules() -> dict[str, Path]:
    return {module_name(p): p for pattern in TEST_FILE_PATTERNS for p in sorted(TESTS.rglob(pattern))}


def imports(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every name an import statement of `source` (the text of `module`) imports, at any depth of the
    tree: `import a.b` gives a.b, `from a import b` gives a and a.b, relative imports resolved."""
    found: set[str] = set()
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base_parts = package[:len(package) - node.level + 1] if node.level else []
            base = ".".join([*base_parts, *([node.module] if node.module else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" if base else alias.name for alias in node.names)
    return found


def imported_test_modules(source: str, module: str, names: set[str], is_package: bool = False) -> list[str]:
    """What `source` (the text of `module`) imports of the test modules `names` (or from them), itself aside."""
    found = imports(source, module, is_package)
    return sorted(n for n in found if n != module and any(n == t or n.startswith(f"{t}.") for t in names))


def test_the_groups_are_the_packages():
    assert {"facts", "spec", "model", "node", "kubernetes", "observability", "plan", "deploy", "kits"} <= GROUPS
    assert "support" not in GROUPS and "data" not in GROUPS


def test_every_test_module_lives_in_a_group_folder():
    misplaced = [str(p.relative_to(ROOT)) for p in collected_test_modules().values()
                 if len(p.relative_to(TESTS).parts) != 2 or p.relative_to(TESTS).parts[0] not in GROUPS]
    assert not misplaced, f"test modules outside tests/<group>/ (groups: {sorted(GROUPS)}): {misplaced}"


def test_every_group_folder_is_a_package():
    folders = {p.parent for p in collected_test_modules().values()}
    folders |= {TESTS / g for g in GROUPS if (TESTS / g).is_dir()}
    missing = sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").is_file())
    assert not missing, f"group folders without __init__.py: {missing}"
    assert (SUPPORT / "__init__.py").is_file()


def test_support_holds_no_test_module():
    found = sorted(str(p.relative_to(ROOT)) for pattern in TEST_FILE_PATTERNS for p in SUPPORT.rglob(pattern))
    assert not found, f"test modules in tests/support/ (only shared helpers belong there): {found}"


def test_no_test_module_imports_another():
    """Nor does a conftest or a support module: what two modules share moves to tests/support/."""
    names = set(collected_test_modules())
    found = {str(p.relative_to(ROOT)): imported_test_modules(p.read_text(encoding="utf-8"), module_name(p), names,
                                                             p.name == "__init__.py")
             for p in sorted(TESTS.rglob("*.py"))}
    found = {path: modules for path, modules in found.items() if modules}
    assert not found, f"imports of test modules (move what they share to tests/support/): {found}"


def test_every_form_of_import_is_read():
    """The reader sees absolute and relative imports, of modules and from packages, in functions."""
    source = "\n".join([
        "import tests.cdk.test_a as a",
        "from tests.cdk import test_b",
        "from tests.cdk.test_c import helper",
        "def f():",
        "    from .test_d import helper",
        "    from . import test_e",
        "    from ..spec.test_f import helper",
        "    if True:",
        "        import tests.spec.test_g",
    ])
    names = {f"tests.{g}.test_{x}" for g, x in (("cdk", "a"), ("cdk", "b"), ("cdk", "c"), ("cdk", "d"),
                                                 ("cdk", "e"), ("spec", "f"), ("spec", "g"))}
    found = imports(source, "tests.cdk.test_h")
    assert names <= found
    assert "tests.cdk.test_c.helper" in found and "tests.cdk" in found
    assert imports("from . import x", "tests.support", is_package=True) == {"tests.support", "tests.support.x"}


def test_a_module_that_imports_a_test_module_is_found():
    names = {"tests.cdk.test_pcs_stack", "tests.cdk.test_x"}
    inside = "def helper():\n    from tests.cdk.test_pcs_stack import new_app\n"
    assert imported_test_modules(inside, "tests.cdk.test_x", names) == [
        "tests.cdk.test_pcs_stack", "tests.cdk.test_pcs_stack.new_app"]
    assert imported_test_modules("from tests.cdk import test_pcs_stack\n", "tests.support.x", names) == [
        "tests.cdk.test_pcs_stack"]
    assert imported_test_modules("from tests.support.stacks import new_app\n", "tests.cdk.test_x", names) == []
    assert imported_test_modules("import tests.cdk.test_x\n", "tests.cdk.test_x", names) == []  # itself
