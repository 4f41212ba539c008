"""`tracegrad dump`: print the graph of a Python function, raw or transformed (docs/cli.md).

```
tracegrad dump model.py:loss --arg f64[3] --arg f64[3] --transform grad
tracegrad dump mypkg.models:predict --arg f32[None,8] --static depth=2 --format dot -o g.dot
```

Uses the public API only. A transform places the ops it makes itself, and its errors, at the
line that applied it (the first frame outside tracegrad and NumPy), which for the dump is the
caller of `main()`, in no file of the user's; so those ops are labelled with the
transform's name (`<jacobian>`) and that place is dropped from error messages. Bad input exits with status 2 and one line on
stderr (`tracegrad dump: error: ...`), never a traceback (`--traceback` shows it).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import inspect
import os
import re
import sys

import tracegrad as tg

PROG = "tracegrad dump"
TRANSFORMS = ("grad", "value_and_grad", "vjp", "jvp", "jacobian", "batch_jacobian", "hessian",
              "vmap")
STAGES = ("traced", "optimized", "compiled")
FORMATS = ("text", "json", "dot")
_SPEC = re.compile(r"^\s*([A-Za-z_][\w]*)\s*\[([^\]]*)\]\s*$")


class CLIError(Exception):
    """Bad input: reported as one line on stderr, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise CLIError(message)


def _build_parser() -> argparse.ArgumentParser:
    top = _Parser(prog="tracegrad", description="tracegrad command line tools")
    commands = top.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    dump = commands.add_parser(
        "dump", help="print the IR of a function",
        description="Trace FUNC with the given argument specs and print its graph.",
    )
    dump.add_argument("target", metavar="FILE.py:FUNC|MODULE:FUNC",
                      help="the function: a path to a .py file or a module name, a colon, "
                           "and the function's name (dotted for attributes: Class.method)")
    dump.add_argument("--arg", dest="args", action="append", default=[], metavar="SPEC",
                      help="one traced argument, in order: DTYPE[DIMS] such as f64[3,4], "
                           "f32[None,8], i64[], bool[5] (a dim may be None or ?)")
    dump.add_argument("--static", action="append", default=[], metavar="NAME=VALUE",
                      help="a static argument by name; VALUE is a Python literal, else a "
                           "string")
    dump.add_argument("--transform", choices=TRANSFORMS,
                      help="dump the graph of this transform of FUNC instead")
    dump.add_argument("--argnums", metavar="N[,N]",
                      help="which traced arguments the transform differentiates (default 0; "
                           "vjp/jvp: all; vmap: which are mapped over axis 0, default all)")
    dump.add_argument("--stage", choices=STAGES, default="traced",
                      help="traced (default), optimized (after tg.optimize), or compiled "
                           "(the generated source)")
    dump.add_argument("--format", choices=FORMATS, default="text",
                      help="text (the IR text form, default), json, or dot (Graphviz)")
    dump.add_argument("--locations", action="store_true",
                      help="text format: end each op with the file:line that created it")
    dump.add_argument("-o", "--output", metavar="FILE", help="write to FILE, not stdout")
    dump.add_argument("--traceback", action="store_true",
                      help="on errors, show the Python traceback too")
    return top


# -- parsing arguments -----------------------------------------------------------------------


def parse_spec(text: str) -> tg.TensorSpec:
    """`"f32[None,8]"` -> `tg.TensorSpec((None, 8), "float32")`."""
    m = _SPEC.match(text)
    if m is None:
        raise CLIError(f"bad --arg {text!r}: expected DTYPE[DIMS] such as f64[3,4], f32[None,8], "
                       "i64[] or bool[5]")
    dtype, body = m.groups()
    dims = []
    for d in (body.split(",") if body.strip() else []):
        d = d.strip()
        if d in ("None", "?"):
            dims.append(None)
        elif d.isdigit():
            dims.append(int(d))
        else:
            raise CLIError(f"bad --arg {text!r}: dim {d!r} is not a size, None or ?")
    try:
        return tg.TensorSpec(dims, dtype)
    except tg.errors.TracegradError as e:
        raise CLIError(f"bad --arg {text!r}: {e}") from None


def parse_static(text: str) -> tuple[str, object]:
    """`"depth=2"` -> `("depth", 2)`; a VALUE that is not a Python literal stays a string."""
    name, eq, value = text.partition("=")
    if not eq or not name.strip().isidentifier():
        raise CLIError(f"bad --static {text!r}: expected NAME=VALUE")
    try:
        return name.strip(), ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return name.strip(), value


def parse_argnums(text: str | None, n_args: int) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        nums = tuple(int(t) for t in text.split(","))
    except ValueError:
        raise CLIError(f"bad --argnums {text!r}: expected integers such as 0 or 0,2") from None
    for n in nums:
        if not -n_args <= n < n_args:
            raise CLIError(f"--argnums {n} is out of range for {n_args} traced argument(s)")
    return tuple(n % n_args for n in nums)


def load_function(target: str):
    """The function named by `FILE.py:FUNC` or `MODULE:FUNC`."""
    where, colon, name = target.rpartition(":")
    if not colon or not where or not name:
        raise CLIError(f"bad target {target!r}: expected FILE.py:FUNC or MODULE:FUNC")
    if where.endswith(".py") or os.sep in where or "/" in where:
        module = _load_file(where)
    else:
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())  # as `python -m tracegrad` has it: the console
            # script would otherwise not find the modules of the folder it is run in
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as e:
            if e.name and where.startswith(e.name):
                raise CLIError(f"no module named {where!r}") from None
            raise CLIError(f"importing {where} failed: {_one_line(e)}") from None
        except Exception as e:
            raise CLIError(f"importing {where} failed: {_one_line(e)}") from None
    obj = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise CLIError(f"{where} has no attribute {name!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        kind = type(obj).__name__
        raise CLIError(f"{where}:{name} is not a function "
                       f"({'an' if kind[0] in 'aeiou' else 'a'} {kind})")
    return obj


def _load_file(path: str):
    if not os.path.isfile(path):
        raise CLIError(f"file not found: {path}")
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)  # so the file can import its neighbours
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    spec = importlib.util.spec_from_file_location(f"_tracegrad_dump_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise CLIError(f"importing {path} failed: {_one_line(e)}") from None
    return module


# -- binding the arguments -------------------------------------------------------------------


def bind_statics(fn, statics: dict, n_args: int):
    """`fn` with the static arguments baked in, taking the `n_args` traced ones positionally.

    The result keeps `fn`'s name and the traced parameters' names (the graph's input names).
    """
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        if statics:
            raise CLIError(f"cannot read the parameters of {fn!r} to bind --static") from None
        return fn
    params = list(sig.parameters.values())
    names = {p.name for p in params}
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
    for key in statics:
        if key not in names and not var_kw:
            raise CLIError(f"--static {key}: {_name(fn)}() has no parameter {key!r}")
    traced = [p for p in params if p.name not in statics
              and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var_pos = next((p for p in params if p.kind is p.VAR_POSITIONAL), None)
    required = [p for p in traced if p.default is p.empty]
    missing_kw = [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty
                  and p.name not in statics]
    if missing_kw:
        raise CLIError(f"{_name(fn)}() needs keyword argument(s) {', '.join(missing_kw)}: "
                       "pass them with --static NAME=VALUE")
    if n_args < len(required) or (n_args > len(traced) and var_pos is None):
        want = (f"{len(required)}" if len(required) == len(traced)
                else f"{len(required)} to {len(traced)}")
        if var_pos is not None:
            want = f"at least {len(required)}"
        raise CLIError(f"{_name(fn)}() takes {want} traced argument(s) "
                       f"({', '.join(p.name for p in traced) or 'none'}), got {n_args} --arg")
    if not statics:
        return fn
    used = traced[:n_args]
    extra = n_args - len(used)
    if any(p.kind is p.POSITIONAL_ONLY and p.name in statics for p in params):
        raise CLIError("--static cannot bind a positional-only parameter")
    if extra and any(p.name in statics for p in params if p.kind is p.POSITIONAL_OR_KEYWORD):
        raise CLIError(f"--static cannot bind a parameter before *{var_pos.name} when "
                       f"--arg fills *{var_pos.name}")

    def bound(*arrays):
        args = list(arrays[:len(used)])
        kwargs = dict(statics)
        if extra:
            return fn(*args, *arrays[len(used):], **kwargs)
        positional = [a for p, a in zip(used, args) if p.kind is p.POSITIONAL_ONLY]
        kwargs.update({p.name: a for p, a in zip(used, args) if p.kind is not p.POSITIONAL_ONLY})
        return fn(*positional, **kwargs)

    shown = [p.replace(kind=p.POSITIONAL_OR_KEYWORD, default=p.empty) for p in used]
    if extra:
        shown += [inspect.Parameter(f"{var_pos.name}_{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD)
                  for i in range(extra)]
    bound.__signature__ = inspect.Signature(shown)
    bound.__name__ = bound.__qualname__ = _name(fn)
    return bound


def _name(fn) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


# -- building the graph ----------------------------------------------------------------------


def _require(name: str, what: str):
    if not hasattr(tg, name):
        raise CLIError(f"{what} is not available in this version of tracegrad "
                       f"(tg.{name} does not exist)")
    return getattr(tg, name)


def _renamed(fn, name, params):
    fn.__name__ = fn.__qualname__ = name
    fn.__signature__ = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params])
    return fn


def _param_names(fn, n: int) -> list[str]:
    try:
        names = [p.name for p in inspect.signature(fn).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    return (names + [f"arg{i}" for i in range(len(names), n)])[:n]


def _spec_like(t) -> tg.TensorSpec:
    return tg.TensorSpec(t.shape, t.dtype)


def _structure(fn, specs):
    """The output structure of `fn` traced on `specs`, its leaves as TensorSpecs."""
    seen = []

    def probe(*xs):
        out = fn(*xs)
        seen.append(out)
        return out

    tg.trace(_renamed(probe, _name(fn), _param_names(fn, len(specs))))(*specs)
    return _map(_spec_like, seen[0])


def _map(f, tree):
    if isinstance(tree, tuple) and hasattr(type(tree), "_fields"):
        return type(tree)(*(_map(f, x) for x in tree))
    if isinstance(tree, (tuple, list)):
        return type(tree)(_map(f, x) for x in tree)
    if isinstance(tree, dict):
        return {k: _map(f, v) for k, v in tree.items()}
    if tree is None:
        return None
    return f(tree)


def _leaves(tree) -> list:
    out = []
    _map(out.append, tree)
    return out


def _unflatten(tree, leaves: list):
    it = iter(leaves)
    return _map(lambda _: next(it), tree)


def _check_ranks(transform: str, specs, params, nums, rank: int, fix: str) -> None:
    """A CLIError naming the first argument at `nums` whose spec has rank below `rank`."""
    for i in nums:
        if len(specs[i].shape) < rank:
            raise CLIError(f"--transform {transform} needs {params[i]} of rank >= {rank}, got "
                           f"--arg {specs[i].to_type()}: {fix}")


def build_graph(fn, specs, transform, argnums):
    """The FuncGraph to dump: `fn` itself, or its `transform`, traced on `specs`.

    `jacobian`, `hessian`, `grad` and `value_and_grad` differentiate the `argnums` arguments
    (default 0); `batch_jacobian` the one `argnums` argument, a batch `[b, x...]`; `vmap` maps
    axis 0 of the `argnums` arguments (default all); `vjp` and `jvp` take cotangent /
    tangent inputs after the arguments (the graphs' inputs, see docs/cli.md).
    """
    name = _name(fn)
    params = _param_names(fn, len(specs))
    if transform is None:
        return tg.trace(fn)(*specs)
    t = _require(transform, f"--transform {transform}")
    if transform in ("grad", "value_and_grad", "jacobian", "hessian"):
        nums = argnums or (0,)
        return tg.trace(t(fn, argnums=nums[0] if len(nums) == 1 else nums))(*specs)
    if transform == "batch_jacobian":
        nums = argnums or (0,)
        if len(nums) != 1:
            raise CLIError("--transform batch_jacobian takes one --argnums")
        _check_ranks("batch_jacobian", specs, params, nums, 2,
                     "give it the batch dim first, [b, x...]")
        return tg.trace(t(fn, argnum=nums[0]))(*specs)
    if transform == "vmap":
        mapped = argnums if argnums is not None else tuple(range(len(specs)))
        _check_ranks("vmap", specs, params, mapped, 1,
                     "give it the batch dim first (vmap maps axis 0), or leave it out of "
                     "--argnums")
        in_axes = tuple(0 if i in mapped else None for i in range(len(specs)))
        return tg.trace(t(fn, in_axes=in_axes))(*specs)
    nums = argnums if argnums is not None else tuple(range(len(specs)))

    def restricted(args_all):
        """`fn` as a function of the `nums` arguments, the others taken from `args_all`."""
        def g(*ps):
            args = list(args_all)
            for i, p in zip(nums, ps, strict=True):
                args[i] = p
            return fn(*args)
        return g

    n = len(specs)
    if transform == "vjp":
        cotangent = _structure(fn, specs)
        leaves = _leaves(cotangent)
        cot_names = ["cotangent"] if len(leaves) == 1 else [
            f"cotangent_{i}" for i in range(len(leaves))]

        def vjp_graph(*xs):
            args, cts = xs[:n], xs[n:]
            _, pullback = t(restricted(args), *[args[i] for i in nums])
            return pullback(_unflatten(cotangent, list(cts)))

        fn_ = _renamed(vjp_graph, f"vjp_{name}", params + cot_names)
        return tg.trace(fn_)(*specs, *leaves)
    # jvp: tangents for the differentiated arguments follow the primals
    def jvp_graph(*xs):
        args, tangents = xs[:n], xs[n:]
        return t(restricted(args), tuple(args[i] for i in nums), tuple(tangents))

    fn_ = _renamed(jvp_graph, f"jvp_{name}", params + [f"tangent_{params[i]}" for i in nums])
    return tg.trace(fn_)(*specs, *[specs[i] for i in nums])


def label_ops(graph, where: str, label: str) -> None:
    """Replace the source `where` of `graph`'s ops (and its sub-graphs') by `label`."""
    for op in graph.operations:
        if op.source == where:
            op.source = label
        for value in op.attrs.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(sub, tg.FuncGraph):
                    label_ops(sub, where, label)


def _step(what: str, fn, *args):
    """`fn(*args)`, any error becoming one CLIError line saying which step failed."""
    try:
        return fn(*args)
    except CLIError:
        raise
    except Exception as e:
        raise CLIError(f"{what} failed: {_one_line(e)}") from e


def render(graph, stage: str, fmt: str, locations: bool) -> str:
    if stage == "compiled" and fmt != "text":
        raise CLIError("--stage compiled prints Python source: use --format text")
    if stage == "optimized":
        graph = _step("tg.optimize", _require("optimize", "--stage optimized"), graph)
    if stage == "compiled":
        source = _require("compiled_source", "--stage compiled")
        return _step("generating the compiled source", source, graph)
    if fmt == "json":
        return _step("writing JSON", graph.to_json)
    if fmt == "dot":
        return _step("writing dot", graph.to_dot)
    return graph.pretty(locations=locations)


# -- entry point -----------------------------------------------------------------------------


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def dump(options) -> str:
    specs = [parse_spec(s) for s in options.args]
    statics = dict(parse_static(s) for s in options.static)
    argnums = parse_argnums(options.argnums, len(specs)) if specs else None
    if options.argnums is not None and not specs:
        raise CLIError("--argnums needs traced arguments (--arg)")
    if options.argnums is not None and options.transform is None:
        raise CLIError("--argnums applies to a --transform")
    if options.locations and options.format != "text":
        raise CLIError("--locations applies to --format text")
    fn = bind_statics(load_function(options.target), statics, len(specs))
    what = f"{options.transform} of {_name(fn)}" if options.transform else _name(fn)
    graph = _step(f"tracing {what}", build_graph, fn, specs, options.transform, argnums)
    if options.transform:
        label_ops(graph, user_location(), f"<{options.transform}>")
    return render(graph, options.stage, options.format, options.locations)


def user_location() -> str:
    """The line tracegrad attributes ops to while `main` runs: its caller's, the first frame
    outside tracegrad and NumPy (and functools / contextlib wrappers)."""
    import os

    import numpy

    skip = tuple(os.path.dirname(m.__file__) + os.sep for m in (tg, numpy))
    f = sys._getframe(1)
    while f is not None and (f.f_code.co_filename.startswith(skip + ("<frozen",)) or
                             f.f_code.co_filename.endswith(("contextlib.py", "functools.py"))):
        f = f.f_back
    return "<unknown>" if f is None else f"{f.f_code.co_filename}:{f.f_lineno}"


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0, or 2 on bad input)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    not_the_users = f" (at {user_location()})"
    parser = _build_parser()
    show_traceback = "--traceback" in argv
    try:
        options = parser.parse_args(argv)
        if options.command is None:
            parser.print_help(sys.stderr)
            return 2
        text = dump(options)
        if options.output:
            try:
                with open(options.output, "w", encoding="utf-8") as f:
                    f.write(text.rstrip("\n") + "\n")
            except OSError as e:
                raise CLIError(f"cannot write {options.output}: {e.strerror}") from None
        else:
            sys.stdout.write(text.rstrip("\n") + "\n")
    except CLIError as e:
        if show_traceback and e.__cause__ is not None:
            import traceback

            traceback.print_exception(e.__cause__, file=sys.stderr)
        message = " ".join(str(e).split()).replace(not_the_users, "")
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 2
    return 0
