"""The public surface: each module's `__all__` is what other files use of it, no more and no
less, and other packages reach a package only through the modules its `__init__` exports.

Names a module uses alone are private (`_name`); errors it raises stay public (its callers
meet them). Tests and benches may use any exported name of any module; product code in one
package reaches another package only through the modules that package's `__all__` lists.
"""

from __future__ import annotations

import ast

from tests import surface


def exports() -> dict[str, list[str]]:
    found = {}
    for name, path, tree in surface.iter_modules():
        if path.name != "__main__.py":
            declared = surface.declared_all(tree)
            assert declared is not None, f"{name} declares no __all__"
            found[name] = declared
    return found


def test_the_reader_sees_every_kind_of_use() -> None:
    modules = surface.product_modules()
    usage = surface.Usage()
    reader = surface.Reader(modules, usage)
    reader.read(
        "from state.blobs import put_json\n"
        "import state.canonical\n"
        "from channels import inbox as box\n"
        "state.canonical.canonical_json(1)\n"
        "box.ingest\n"
        "monkeypatch.setattr(box, 'unprocessed', None)\n"
        "patch('channels.messages.get_message')\n"
        "subprocess.run(['python', '-c', 'from state.leases import claim'])\n"
        "open('state.sqlite')\n"
        "inject('channels.telegram.poll:poll')\n",
        "tests/example.py")
    assert set(usage.names) == {
        ("state.blobs", "put_json"), ("state", "canonical"),
        ("state.canonical", "canonical_json"), ("channels", "inbox"),
        ("channels.inbox", "ingest"), ("channels.inbox", "unprocessed"),
        ("channels.messages", "get_message"), ("state.leases", "claim"),
        ("channels.telegram.poll", "poll")}


def test_every_module_exports_exactly_what_other_files_use() -> None:
    usage = surface.used_outside()
    modules = surface.product_modules()
    across = surface.modules_used_across(usage, modules)
    declared = exports()
    problems = []
    for name, path, tree in surface.iter_modules():
        if name not in declared:
            continue
        defs = surface.top_level_definitions(tree)
        imports = surface.top_level_imports(tree)
        listed = set(declared[name])
        if path.name == "__init__.py":
            children = {m.rsplit(".", 1)[1] for m in modules
                        if m.rsplit(".", 1)[0] == name and m != name}
            for entry in sorted(listed):
                if entry in children:
                    if entry not in across.get(name, {}):
                        problems.append(f"{name}: exports {entry}, which no other package uses")
                elif entry not in defs and entry not in imports:
                    problems.append(f"{name}: exports {entry}, which it does not hold")
            continue
        for entry in defs:
            if surface.public(entry) and entry not in listed:
                problems.append(f"{name}.{entry}: public but not in __all__ (export or `_` it)")
        for entry in sorted(listed):
            if entry not in defs and entry not in imports:
                problems.append(f"{name}: exports {entry}, which it does not hold")
            elif (name, entry) not in usage.names and not (
                    entry in defs and surface.is_exception_class(defs[entry])):
                problems.append(f"{name}.{entry}: used only in its own module; make it private")
    assert problems == []


def test_no_file_uses_a_name_its_module_does_not_export() -> None:
    usage = surface.used_outside()
    modules = surface.product_modules()
    declared = exports()
    problems = sorted(
        f"{sorted(users)[0]} uses {module}.{name}, which {module} does not export"
        for (module, name), users in usage.names.items()
        if module in declared and f"{module}.{name}" not in modules
        and name not in declared[module] and not name.startswith("__"))
    assert problems == []


def test_other_packages_reach_a_package_only_through_its_exported_modules() -> None:
    usage = surface.used_outside()
    modules = surface.product_modules()
    declared = exports()
    problems = sorted(
        f"{sorted(users)[0]} reaches {package}.{child}, which {package} does not export"
        for package, children in surface.modules_used_across(usage, modules).items()
        for child, users in children.items()
        if child not in declared.get(package, []))
    assert problems == []


# The names one package's product code uses of another's, at most (issue 29: 449 before the
# packages' surfaces were narrowed). Lower it when a change narrows a surface; a change that
# must widen one says why in its commit.
MAX_CROSSING_NAMES = 297


def test_the_names_crossing_packages_do_not_grow() -> None:
    found = surface.crossing(surface.used_outside(), surface.product_modules())
    assert len(found) <= MAX_CROSSING_NAMES, sorted(f"{m}.{n}" for m, n in found)


def test_crossing_counts_only_product_modules_of_another_package() -> None:
    modules = surface.product_modules()
    usage = surface.Usage()
    reader = surface.Reader(modules, usage)
    reader.read("from state.blobs import put_json\n", "channels.inbox")
    reader.read("from channels.text import utf16_len\n", "tests/example.py")
    reader.read("from channels.decisions.views import view\n", "channels.decisions.workflows")
    reader.read("from channels.decisions import views\n", "channels.telegram.poll")
    assert surface.crossing(usage, modules) == {("state.blobs", "put_json")}


def test_each_all_is_a_plain_list_of_strings() -> None:
    """A literal list, so that the checks above (and readers) can read it without importing."""
    for name, _path, tree in surface.iter_modules():
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                assert isinstance(node.value, ast.List), name
                assert all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                           for e in node.value.elts), name
