"""A collector's cheap text test (``wanted``) may rule a file out only when the file cannot give it
anything: each text its patterns stand for must still be wanted after the fast pre-checks. The
other scans of a file's whole text must find what their regular expressions would."""

from __future__ import annotations

import random
import re

import pytest

from lint_rules.facts.extract import _quoted_private
from lint_rules.facts.forward_patches import ForwardPatches
from lint_rules.facts.meta_submodules import MetaSubmodules
from lint_rules.facts.model_flow import ModelFlow

SET_UPS = ["fabric.setup(model)", "fabric.setup_module (model)", "fully_shard(layer)", "DistributedDataParallel",
           "FullyShardedDataParallel", "accelerator.prepare(model)", "accelerator.prepare_model(model)",
           "model = DDP(model)", "FSDP(model)", "strategy.mark_forward_method('generate')",
           "register_fsdp_forward_method(model, 'generate')"]


@pytest.mark.parametrize("text", SET_UPS)
def test_every_set_up_text_is_wanted(text: str) -> None:
    assert ModelFlow.wanted(text)
    assert ModelFlow.wanted(f"import torch\n{text}\n")


@pytest.mark.parametrize("text", ["from x import DDPM", "self.prepared = 1", "class Setup: pass", "class MyDDP: pass",
                                  "USE_FSDP2 = True", "x = FSDP_"])
def test_other_text_is_not_a_set_up(text: str) -> None:
    assert not ModelFlow.wanted(text)


@pytest.mark.parametrize(("text", "wanted"), [
    ("model.forward = fn", True), ("setattr(m, 'forward', fn)", True), ('getattr(m, "forward")', True),
    ("fn.__name__ = 'forward'", True), ("fn.__qualname__ = 'M.forward'", True), ("m.__dict__[name] = fn", True),
    ("if model.forward == fn: pass", False), ("y = self.forward(x)", False), ("if __name__ == '__main__': pass", False),
])
def test_forward_patch_texts(text: str, wanted: bool) -> None:
    assert ForwardPatches.wanted(text) is wanted


@pytest.mark.parametrize(("text", "wanted"), [
    ('with torch.device("meta"):', True), ("x.to('meta')", True), ("DEVICE = r'meta'", True),
    ("with init_empty_weights():", True), ("from accelerate import init_on_device", True),
    ("self.metadata = load_metadata(path)", False), ("class Meta(type): pass", False), ("# meta device", False),
])
def test_meta_device_texts(text: str, wanted: bool) -> None:
    """accelerate's ``init_empty_weights()`` puts modules on meta without naming the device."""
    assert MetaSubmodules.wanted(text) is wanted


def test_quoted_private_names_are_those_the_regular_expression_finds() -> None:
    """``findall``'s matches do not overlap: in ``"_a"_b"`` the quote closing ``_a`` opens nothing."""
    rng = random.Random(7)
    texts = ["".join(rng.choice("\"'_ab1 \n") for _ in range(rng.randrange(16))) for _ in range(20000)]
    texts += ['"_a"_b"', "'_x' \"_y\" '_z\"", "getattr(self, '_sample')", '"__dunder__"', "'_' '_1'"]
    for text in texts:
        expected = tuple(sorted(set(re.findall(r"""["'](_[A-Za-z]\w*)["']""", text))))
        assert _quoted_private(text) == expected, text
