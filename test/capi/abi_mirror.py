"""The Python binding's view of the C ABI (python/flashbob/_capi.py) checked against api/flashbob.h
by the C compiler, so that a change on either side that the other does not follow fails here:

- every entry point of _capi.SIGNATURES, its C types spelled as the table has them, is assigned
  to a function pointer of that type (compiled with incompatible pointer types as errors);
- every constant of _capi.CONSTANTS has the header's value (static assertions);
- the ctypes structs Problem and Tensor have the header's size, and each field its offset, size
  and signedness (a program compiled from the header prints them);
- every C type the table uses has a ctypes type.

    python3 test/capi/abi_mirror.py --cc CC --root REPOSITORY

Needs no GPU, no library and no torch.
"""

import argparse
import ctypes
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def compile_signatures(capi, cc, root, work):
    lines = ['#include "api/flashbob.h"', ""]
    for name, (result, params) in capi.SIGNATURES.items():
        args = ", ".join(params) if params else "void"
        lines.append(f"{result} (*const check_{name})({args}) = {name};")
    for py_name, c_name in capi.CONSTANTS:
        value = getattr(capi, py_name)
        lines.append(f'_Static_assert({c_name} == {value}, "{py_name} is {c_name}");')
    source = work / "signatures.c"
    source.write_text("\n".join(lines) + "\n")
    result = subprocess.run([cc, "-std=c11", "-fsyntax-only", "-Werror=incompatible-pointer-types",
                             "-Werror=int-conversion", f"-I{root}", str(source)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        return [f"the binding's signatures or constants differ from api/flashbob.h:\n"
                f"{result.stderr}"]
    return []


def c_layout(structs, cc, root, work):
    """{(struct, field): (offset, size, signed)} and {struct: size}, as the header has them."""
    lines = ['#include "api/flashbob.h"', "#include <stddef.h>", "#include <stdio.h>", "",
             "int main(void) {"]
    for c_name, ctype in structs:
        lines.append(f'  printf("size {c_name} %zu\\n", sizeof({c_name}));')
        for field, field_type in ctype._fields_:
            member = f"((({c_name} *)0)->{field})"
            # An array field's signedness is its elements'.
            element = f"{member}[0]" if hasattr(field_type, "_length_") else member
            lines.append(f'  printf("field {c_name} {field} %zu %zu %d\\n", offsetof({c_name}, '
                         f'{field}), sizeof({member}), (int)((__typeof__({element}))-1 < '
                         f'(__typeof__({element}))0));')
    lines += ["  return 0;", "}"]
    source, program = work / "layout.c", work / "layout"
    source.write_text("\n".join(lines) + "\n")
    built = subprocess.run([cc, "-std=gnu11", f"-I{root}", str(source), "-o", str(program)],
                           capture_output=True, text=True)
    if built.returncode != 0:
        raise SystemExit(f"a field of the binding's structs is not in api/flashbob.h:\n"
                         f"{built.stderr}")
    sizes, fields = {}, {}
    for line in subprocess.run([str(program)], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        kind, *rest = line.split()
        if kind == "size":
            sizes[rest[0]] = int(rest[1])
        else:
            fields[rest[0], rest[1]] = (int(rest[2]), int(rest[3]), rest[4] == "1")
    return sizes, fields


def header_fields(header, c_name):
    """The field names of struct `c_name` in the header, in order (declarations like
    `int64_t batch, heads;`, `int64_t stride[4];`, `const void *p;`)."""
    text = re.sub(r"/\*.*?\*/", " ", header, flags=re.S)
    body = re.search(r"typedef struct " + c_name + r"\s*\{(.*?)\}\s*" + c_name + r"\s*;", text,
                     flags=re.S)
    if not body:
        raise SystemExit(f"struct {c_name} not found in api/flashbob.h")
    names = []
    for declaration in body.group(1).split(";"):
        parts = declaration.split(",")
        if not parts[0].strip():
            continue
        for part in parts:
            words = re.findall(r"\w+", re.sub(r"\[.*?\]", "", part))
            names.append(words[-1])
    return names


def signed(ctype):
    """Whether a ctypes scalar type is signed (pointers and floats count as neither: None)."""
    if ctype in (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_double, ctypes.c_float):
        return None
    return ctype(-1).value < 0


def check_layout(capi, cc, root, work):
    structs = [("flashbob_problem", capi.Problem), ("flashbob_tensor", capi.Tensor)]
    sizes, fields = c_layout(structs, cc, root, work)
    # Fields declared with one of the header's enum types (flashbob_dtype dtype;).
    header = (root / "api" / "flashbob.h").read_text()
    enums = {m.group(2) for m in re.finditer(r"\b(flashbob_\w+)\s+(\w+)\s*;", header)
             if re.search(r"typedef enum " + m.group(1) + r"\b", header)}
    errors = []
    for c_name, ctype in structs:
        # Every field, in order: a field added where the struct had padding keeps its size.
        declared = header_fields(header, c_name)
        bound = [field for field, _ in ctype._fields_]
        if declared != bound:
            errors.append(f"{c_name}: the header declares {declared}, the binding {bound}")
        if ctypes.sizeof(ctype) != sizes[c_name]:
            errors.append(f"{c_name}: {sizes[c_name]} bytes in the header, "
                          f"{ctypes.sizeof(ctype)} in the binding")
        for field, field_type in ctype._fields_:
            offset, size, is_signed = fields[c_name, field]
            got = getattr(ctype, field)
            if (got.offset, got.size) != (offset, size):
                errors.append(f"{c_name}.{field}: offset {offset}, {size} bytes in the header; "
                              f"offset {got.offset}, {got.size} bytes in the binding")
            expect = signed(getattr(field_type, "_type_", field_type)
                            if hasattr(field_type, "_length_") else field_type)
            # An enum's signedness is the compiler's choice (its values fit either way).
            if expect is not None and field not in enums and expect != is_signed:
                errors.append(f"{c_name}.{field}: {'signed' if is_signed else 'unsigned'} in "
                              f"the header, not in the binding")
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cc", required=True)
    ap.add_argument("--root", required=True, type=Path)
    args = ap.parse_args()
    sys.path.insert(0, str(args.root / "python"))
    from flashbob import _capi  # loads no library until a call

    errors = [f"{t!r} (in SIGNATURES) has no ctypes type in _CTYPES"
              for result, params in _capi.SIGNATURES.values() for t in (result, *params)
              if t not in _capi._CTYPES]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        errors += compile_signatures(_capi, args.cc, args.root, work)
        errors += check_layout(_capi, args.cc, args.root, work)
    if errors:
        print("\n".join(errors))
        return 1
    print(f"the binding matches api/flashbob.h: {len(_capi.SIGNATURES)} entry points, "
          f"{len(_capi.CONSTANTS)} constants, {len(_capi.Problem._fields_)} + "
          f"{len(_capi.Tensor._fields_)} struct fields")
    return 0


if __name__ == "__main__":
    sys.exit(main())
