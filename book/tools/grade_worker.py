"""Hand-written: the answer process of the grader (book/tools/grade.py).

The grader starts this script, in bubblewrap where it can, for each submission. It runs
the student's answer cells and then, at the grader's request, calls the functions they
define on the grader's inputs and sends back what they return, as data. The checks, and
every comparison that decides a verdict, run in the grader's own process, which never
runs a student's code and reads what comes from here with
``torch.load(weights_only=True)``: data (tensors, numbers, strings, lists, dicts), never
code. Patching torch or the checks here changes nothing there, and no message from here
can say "passed".

Only the exercises in ``grade.JUDGED_BESIDE_THE_ANSWER`` (a check that gives the answer
a live model and a function of its own, or builds objects of the student's class) have
their checks run here, as before; for them this process sends a verdict.

The wire: each message is 8 bytes of length (big-endian) and a ``torch.save`` payload.
"""

from __future__ import annotations

import contextlib
import io
import os
import struct
import sys
import types

import torch

OPAQUE = "__tinybert_opaque__"  # a value that is not data: its type and repr
SET = "__tinybert_set__"  # a set or frozenset, as a list
GENERATOR = "__tinybert_generator__"  # a torch.Generator, as its state
MODULE = "__tinybert_module__"  # an nn.Module handed back: its tensors and settings
SIMPLE = (type(None), bool, int, float, complex, str, bytes)
RUN, COMPILE = exec, compile  # kept: an answer may replace the builtins


def encode(message) -> bytes:
    buffer = io.BytesIO()
    torch.save(message, buffer)
    payload = buffer.getvalue()
    return struct.pack(">Q", len(payload)) + payload


def decode(payload: bytes, *, trusted: bool):
    """A message's payload; ``trusted=False`` (the grader reading this process) accepts
    data only."""
    return torch.load(io.BytesIO(payload), weights_only=not trusted)


def to_data(value, tensors: list | None = None, depth: int = 0):
    """``value`` as data that ``torch.load(weights_only=True)`` reads: tensors
    (detached; the originals are appended to ``tensors``, in order), numbers, strings,
    lists, tuples, dicts, sets (tagged), generators (their state); anything else
    becomes a tagged description of its type and repr."""
    if type(value) in SIMPLE:
        return value
    if isinstance(value, (torch.Size, torch.dtype, torch.device)):
        return value
    if depth > 30:
        return _opaque(value)
    if isinstance(value, torch.Tensor):
        if tensors is not None:
            tensors.append(value)
        return value.detach().cpu().clone()
    if isinstance(value, torch.Generator):
        return {GENERATOR: value.get_state()}
    if isinstance(value, (list, tuple)):
        items = [to_data(v, tensors, depth + 1) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        return {to_data(k, None, depth + 1): to_data(v, tensors, depth + 1)
                for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return {SET: [to_data(v, None, depth + 1) for v in value],
                "frozen": isinstance(value, frozenset)}
    return _opaque(value)


def _opaque(value) -> dict:
    try:
        shown = repr(value)
    except Exception:  # a student's __repr__ may fail
        shown = f"<{type(value).__name__}>"
    return {OPAQUE: type(value).__name__, "repr": shown[:300]}


def state_of(value, depth: int = 0):
    """What the grader copies back into the arguments it passed after a call: like
    ``to_data``, with an nn.Module as its tensors, gradients and plain settings."""
    if isinstance(value, torch.nn.Module):
        modules = dict(value.named_modules())
        return {MODULE: True,
                "tensors": {k: to_data(v) for k, v in value.state_dict().items()},
                "grads": {k: to_data(p.grad) for k, p in value.named_parameters()},
                "settings": {name: {k: v for k, v in vars(m).items()
                                    if type(v) in SIMPLE and not k.startswith("_")}
                             for name, m in modules.items()}}
    if isinstance(value, (list, tuple)) and depth < 30:
        items = [state_of(v, depth + 1) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict) and depth < 30:
        return {to_data(k): state_of(v, depth + 1) for k, v in value.items()}
    return to_data(value)


def from_grader(value):
    """The grader's arguments as the answer receives them (generators rebuilt)."""
    if isinstance(value, dict) and GENERATOR in value:
        return torch.Generator().set_state(value[GENERATOR])
    if isinstance(value, list):
        return [from_grader(v) for v in value]
    if isinstance(value, tuple):
        return tuple(from_grader(v) for v in value)
    if isinstance(value, dict):
        return {k: from_grader(v) for k, v in value.items()}
    return value


def gradient_inputs(value) -> list[torch.Tensor]:
    """The tensors of the grader's arguments that require grad, in the order the
    grader lists them too: tensors, list and tuple items, dict values, parameters."""
    if isinstance(value, torch.Tensor):
        return [value] if value.requires_grad else []
    if isinstance(value, torch.nn.Module):
        return [p for p in value.parameters() if p.requires_grad]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in gradient_inputs(v)]
    return []


def raised(error: BaseException) -> tuple:
    """An exception as data: the names of its classes (the grader raises the first
    built-in one) and its message."""
    names = [cls.__name__ for cls in type(error).__mro__]
    return ("raise", names, str(error)[:2000])


def fresh_state() -> None:
    """What an answer may change for the next one: torch's default dtype, grad mode."""
    torch.set_default_dtype(torch.float32)
    torch.set_grad_enabled(True)


def describe(namespace: dict) -> dict:
    """name -> ("callable" | "module" | "data", value) for what the answer defined."""
    found = {}
    for name, value in namespace.items():
        if name.startswith("__"):
            continue
        if isinstance(value, types.ModuleType):
            found[name] = ("module", value.__name__)
        elif callable(value):
            found[name] = ("callable", None)
        else:
            found[name] = ("data", to_data(value))
    return found


def serve(requests, replies) -> None:
    """Answer the grader's requests until it closes the pipe."""
    namespace: dict = {}
    calls: dict[int, tuple[list, list]] = {}
    quiet = io.StringIO()

    def reply(message) -> None:
        replies.write(encode(message))
        replies.flush()

    reply(("ready",))
    while True:
        header = requests.read(8)
        if len(header) < 8:
            return
        request = decode(requests.read(struct.unpack(">Q", header)[0]), trusted=True)
        quiet.seek(0)
        quiet.truncate()
        try:
            with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
                message = handle(request, namespace, calls)
        except BaseException as error:
            if isinstance(error, KeyboardInterrupt):
                raise
            message = raised(error)
        try:
            reply(message)
        except Exception as error:  # what the answer returned will not serialise
            reply(raised(error))


def handle(request, namespace: dict, calls: dict):
    kind = request[0]
    if kind == "answer":  # ("answer", sources): run them in a fresh namespace
        fresh_state()
        namespace.clear()
        namespace["__name__"] = "__exercise__"
        calls.clear()
        for index, source in enumerate(request[1]):
            RUN(COMPILE(source, f"<answer cell {index + 1}>", "exec"), namespace)
        return ("names", describe(namespace))
    if kind == "call":  # ("call", name, args, kwargs)
        _, name, args, kwargs = request
        args, kwargs = from_grader(args), from_grader(kwargs)
        inputs = gradient_inputs([args, kwargs])
        result = namespace[name](*args, **kwargs)
        outputs: list[torch.Tensor] = []
        data = to_data(result, outputs)
        calls[len(calls)] = (inputs, outputs)
        needs = [t.requires_grad for t in outputs]
        return ("return", data, state_of([args, kwargs]), needs, len(calls) - 1)
    if kind == "backward":  # ("backward", call, gradients of the outputs)
        inputs, outputs = calls[request[1]]
        pairs = [(o, g) for o, g in zip(outputs, request[2])
                 if o.requires_grad and g is not None]
        grads = torch.autograd.grad([o for o, _ in pairs], inputs,
                                    [g for _, g in pairs], allow_unused=True,
                                    retain_graph=True) if pairs and inputs else []
        return ("grads", [to_data(g) for g in grads])
    if kind == "check":  # ("check", sources): an exercise judged beside the answer
        return ("verdict", *run_checks(request[1], namespace))
    raise ValueError(f"unknown request {kind!r}")


def run_checks(sources: list[str], namespace: dict) -> tuple[bool, str]:
    for name in [n for n in sys.modules if n.startswith("tinybert.exercises")]:
        del sys.modules[name]  # the course's checks, not the answer's version of them
    fresh_state()
    try:
        for index, source in enumerate(sources):
            RUN(COMPILE(source, f"<check cell {index + 1}>", "exec"), namespace)
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt):
            raise
        message = f"{type(error).__name__}: {error}".strip()
        if not isinstance(error, (AssertionError, NotImplementedError)):
            message += " (raised in the check)"
        return False, message
    return True, ""


def main() -> None:
    # The replies go on a private copy of stdout; whatever the answer prints (Python or
    # native code) goes nowhere.
    replies = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.stdout = open(os.devnull, "w")
    requests = os.fdopen(os.dup(0), "rb")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    serve(requests, replies)


if __name__ == "__main__":
    main()
