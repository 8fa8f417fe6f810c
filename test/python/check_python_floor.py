"""The package runs on the oldest Python it claims (pyproject.toml's requires-python): every file
of python/flashbob parses with that version's grammar, no annotation evaluated at import time
uses `X | Y` (a TypeError before 3.10, which the grammar check cannot see), and the README states
the same floor.

    check_python_floor.py <source root>
"""

import ast
import re
import sys
from pathlib import Path

root = Path(sys.argv[1])
pyproject = (root / "pyproject.toml").read_text()
m = re.search(r'^requires-python\s*=\s*">=\s*(\d+)\.(\d+)"', pyproject, re.MULTILINE)
if not m:
    sys.exit('FAIL: pyproject.toml has no requires-python = ">=3.N"')
floor = (int(m.group(1)), int(m.group(2)))
floor_text = "{}.{}".format(*floor)
failures = []


def evaluated_annotations(tree):
    """The annotations Python evaluates when the module is imported: those of function parameters
    and returns, and of names assigned at module or class level (not inside functions)."""
    def walk(body, in_function):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
                    if arg is not None and arg.annotation is not None:
                        yield arg.annotation
                if node.returns is not None:
                    yield node.returns
                yield from walk(node.body, True)
            elif isinstance(node, ast.ClassDef):
                yield from walk(node.body, in_function)
            elif isinstance(node, ast.AnnAssign) and not in_function:
                yield node.annotation
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                for field in ("body", "orelse", "finalbody"):
                    yield from walk(getattr(node, field, []), in_function)
                for handler in getattr(node, "handlers", []):
                    yield from walk(handler.body, in_function)
    yield from walk(tree.body, False)


files = sorted((root / "python" / "flashbob").rglob("*.py"))
if not files:
    sys.exit(f"FAIL: no .py files under {root / 'python' / 'flashbob'}")
for path in files:
    name = path.relative_to(root)
    source = path.read_text()
    try:
        tree = ast.parse(source, filename=str(name), feature_version=floor)
    except SyntaxError as e:
        failures.append(f"{name}:{e.lineno}: not Python {floor_text} grammar: {e.msg}")
        continue
    postponed = any(isinstance(n, ast.ImportFrom) and n.module == "__future__"
                    and any(a.name == "annotations" for a in n.names) for n in tree.body)
    if floor < (3, 10) and not postponed:
        for annotation in evaluated_annotations(tree):
            for n in ast.walk(annotation):
                if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr):
                    failures.append(f"{name}:{n.lineno}: `{ast.unparse(n)}` in an annotation "
                                    f"evaluated at import: Python 3.10 or newer")

# The README's requirements name the same floor.
readme = (root / "README.md").read_text()
stated = set(re.findall(r"Python (3\.\d+) or newer", readme))
if stated != {floor_text}:
    failures.append(f"README.md says Python {', '.join(sorted(stated)) or '(nothing)'} or newer, "
                    f"pyproject.toml {floor_text}")

for f in failures:
    print("FAIL:", f)
if failures:
    sys.exit(1)
print(f"ok: {len(files)} files of python/flashbob are Python {floor_text} code, as the README says")
