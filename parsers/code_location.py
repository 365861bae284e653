"""Whose code a file path is: torch's, a third-party library's, Python's, generated, or the user's.

The one rule for every view and analyzer. A path is classified by the module it is, never by a
substring of its install prefix: `/opt/torch/.venv/lib/python3.12/site-packages/transformers/...`
is the `transformers` library (the `torch/` in the prefix is a directory name), and
`/home/me/torch/train.py` is the user's code.

* **torch**: the `torch` package (with `functorch`, `torchgen`) under site-packages or
  dist-packages, or a source checkout / editable install of PyTorch (a path `…/torch/_dynamo/…`,
  `…/torch/nn/…`: a directory `torch` followed by one of torch's own subpackages or modules).
* **library**: any other top-level package under site-packages/dist-packages, named by that
  package (`transformers`, `timm`, `six`); a source checkout or editable install of a well-known
  library (`…/src/transformers/…`, `…/vllm/vllm/…`, `…/pytorch-image-models/timm/…`).
* **python**: the standard library (`…/lib/python3.12/…` outside site-packages).
* **generated**: code with no file of its own (`<frozen …>`, `<string>`, `<eval_with_key>`) and
  the modules Inductor writes into its cache directory (`torchinductor_<user>/…`).
* **user**: everything else.

`shown(path)` is the path a person reads: module-relative for torch, libraries and Python
(`transformers/models/llama/modeling_llama.py`), the path itself for the user's code (callers
shorten it to what tells the run's files apart).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

TORCH_PACKAGES = frozenset({"torch", "functorch", "torchgen"})

# torch's own subpackages and top-level modules, to tell a PyTorch source checkout
# (`~/pytorch/torch/_dynamo/eval_frame.py`) from a user's directory that happens to be named
# `torch` (`/opt/torch/train.py`)
_TORCH_SUBPACKAGES = (
    "ao", "amp", "autograd", "backends", "compiler", "cpu", "cuda", "distributed", "distributions",
    "export", "fft", "func", "futures", "fx", "jit", "library", "linalg", "masked", "mps", "mtia",
    "multiprocessing", "nested", "nn", "onnx", "optim", "package", "profiler", "quantization",
    "signal", "sparse", "special", "testing", "utils", "xpu",
)
_TORCH_MODULES = (
    "__init__", "functional", "overrides", "serialization", "random", "hub", "library", "storage",
    "types", "return_types", "quasirandom", "_tensor", "_ops", "_jit_internal",
)
_TORCH_CHECKOUT = re.compile(
    r"(?:^|/)(?P<rel>torch/(?:_[A-Za-z]\w*(?:/|\.py$)|(?:" + "|".join(_TORCH_SUBPACKAGES) + r")/|(?:"
    + "|".join(_TORCH_MODULES) + r")\.py$).*)$"
)

# well-known libraries, recognised outside site-packages too (a source checkout, an editable
# install): the package directory inside `src/`, inside a directory of its own name, or inside
# the repository's usual name
KNOWN_LIBRARIES = frozenset({
    "accelerate", "apex", "bitsandbytes", "deepspeed", "detectron2", "diffusers", "einops",
    "fairseq", "fbgemm_gpu", "flash_attn", "lightning", "liger_kernel", "megatron", "mmcv", "mmdet",
    "nemo", "open_clip", "peft", "pytorch_lightning", "sentence_transformers", "sglang", "timm",
    "torchao", "torchaudio", "torchrec", "torchtitan", "torchtune", "torchvision",
    "transformer_engine", "transformers", "triton", "trl", "vllm", "xformers",
})
_REPOSITORY_OF = {
    "pytorch-image-models": "timm", "Megatron-LM": "megatron", "TransformerEngine": "transformer_engine",
    "flash-attention": "flash_attn", "DeepSpeed": "deepspeed", "NeMo": "nemo", "ao": "torchao",
    "audio": "torchaudio", "vision": "torchvision", "Liger-Kernel": "liger_kernel",
}

_INSTALLED = re.compile(r"(?:^|/)(?:site|dist)-packages/")
_STDLIB = re.compile(r"(?:^|/)lib(?:64)?/(?:python\d+(?:\.\d+)?t?|pypy\d*(?:\.\d+)?)/(?P<rel>.+)$")
# Inductor's generated modules: its cache directory (torchinductor_<user>, or a cache directory
# of the user's choosing, whose modules are named by their hash: ab/cab…50+ chars….py)
_GENERATED_DIR = re.compile(r"<eval_with_key>|torchinductor|/tv_gpu_cache_|/[a-z0-9]{2}/c[a-z0-9]{50,}\.py")

# a torch frame in a traceback's bytes (`File "…/site-packages/torch/…"`, a PyTorch checkout),
# for telling a captured stderr from any other text file before anything is decoded
TORCH_FILE_BYTES = (
    rb'(?:[^"\n]*/(?:site|dist)-packages/(?:torch|functorch)/[^"\n]*|[^"\n]*/torch/(?:_[A-Za-z]\w*/|(?:'
    + "|".join(_TORCH_SUBPACKAGES).encode()
    + rb')/)[^"\n]*)'
)


@dataclass(frozen=True, slots=True)
class Code:
    """Whose code one path is. `owner`: torch, library, python, generated, user or unknown;
    `package`: the top-level package (`torch`, `transformers`; None for user code); `shown`:
    the path a person reads (module-relative outside the user's code)."""

    owner: str
    package: str | None
    shown: str

    @property
    def is_torch(self) -> bool:
        return self.owner == "torch"

    @property
    def is_user(self) -> bool:
        return self.owner == "user"

    def describe(self) -> str:
        """`torch's own code`, `the transformers library's code`, `Python's standard library`,
        `code torch generated`, `your code`."""
        return {
            "torch": "torch's own code",
            "library": f"the {self.package} library's code",
            "python": "Python's standard library",
            "generated": "code torch generated",
            "user": "your code",
        }.get(self.owner, "code of unknown origin")


@lru_cache(maxsize=65536)
def whose(path: str | None) -> Code:
    """Classify one file path (see the module docstring)."""
    if not path:
        return Code("unknown", None, "")
    p = path.replace("\\", "/")
    if p.startswith("<") or _GENERATED_DIR.search(p):
        return Code("generated", None, p.rsplit("/", 1)[-1] if not p.startswith("<") else p)
    installed = [m.end() for m in _INSTALLED.finditer(p)]
    if installed:  # the innermost site-packages (a venv inside another's prefix)
        rel = p[installed[-1]:]
        top = rel.split("/", 1)[0]
        if top.endswith(".egg") and "/" in rel:  # an old-style egg: the package is inside
            rel = rel.split("/", 1)[1]
            top = rel.split("/", 1)[0]
        top = re.sub(r"\.(?:py|pyc|so|pyd)$|\..*\.so$", "", top)
        if top in TORCH_PACKAGES:
            return Code("torch", "torch", rel)
        return Code("library", top or None, rel)
    std = _STDLIB.search(p)
    if std is not None:
        return Code("python", None, std["rel"])
    ck = _TORCH_CHECKOUT.search(p)
    if ck is not None:
        return Code("torch", "torch", ck["rel"])
    parts = p.split("/")
    for k in range(len(parts) - 2, 0, -1):
        name, parent = parts[k], parts[k - 1]
        if name in KNOWN_LIBRARIES and (parent in ("src", name) or _REPOSITORY_OF.get(parent) == name):
            return Code("library", name, "/".join(parts[k:]))
    return Code("user", None, p)


def is_torch(path: str | None) -> bool:
    """A file of torch itself (not a library, not a directory named torch in a prefix)."""
    return whose(path).is_torch


def is_user(path: str | None) -> bool:
    """A file of the user's own program."""
    return whose(path).is_user


def shown(path: str | None, line: object = None) -> str:
    """The path a person reads, with `:line` when given: `transformers/models/llama/modeling_llama.py:295`."""
    s = whose(path).shown or (path or "?")
    return f"{s}:{line}" if line is not None else s


def brief(path: str | None) -> str:
    """The short name of a file: module-relative outside the user's code
    (`transformers/models/llama/modeling_llama.py`), the file name for the user's code."""
    if not path:
        return ""
    code = whose(path)
    return code.shown if not code.is_user else path.replace("\\", "/").rsplit("/", 1)[-1]


_FRAME = re.compile(r"^(?P<path>.*?):(?P<line>\d+) in (?P<fn>[^:]*?)(?::\s(?P<src>.*))?$")


def call_site(stack: list[str] | None) -> tuple[str, int, str, str | None] | None:
    """The user's line that entered a compiled frame: the innermost frame of the user's code
    in `dynamo_start`'s stack other than the compiled frame itself (the stack's last entry),
    as (filename, line, function, source text); None when no frame of the user's code called it
    (a frame entered from torch's or a library's code alone, or no stack)."""
    frames = list(stack or [])[:-1]
    for s in reversed(frames):
        m = _FRAME.match(s)
        if m is None or not is_user(m["path"]):
            continue
        return m["path"], int(m["line"]), m["fn"], (m["src"] or None)
    return None
