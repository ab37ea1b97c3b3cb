"""The published transformers the parameter-analysis chapter counts: BERT, GPT-2 and Llama 2, as data.

Each :class:`ModelConfig` holds enough of a model's shape to count its parameters exactly
(:func:`mha.chapters.costs.configs.total_params`), the exact count of the released checkpoint, the
rounded figure its paper gives, and the context length it was trained with.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...counting import attention_params


@dataclass(frozen=True)
class ModelConfig:
    """The shape of a published transformer, enough to count its parameters exactly.

    ``family`` says how the non-attention parts are built:
    ``"bert"`` (post-norm encoder: word + position + token-type embeddings and a LayerNorm,
    a GELU MLP with biases, a tanh pooler), ``"gpt2"`` (pre-norm decoder: token + position
    embeddings, a final LayerNorm, the output layer tied to the token embedding) or
    ``"llama"`` (pre-norm decoder with RMSNorm, a SwiGLU MLP without biases, rotary positions,
    so no position table, and an untied output layer).

    ``published_params`` is the exact parameter count of the released checkpoint;
    ``paper_params`` the rounded figure the paper gives; ``train_context`` the sequence length it
    was trained with (its learned positions for BERT and GPT-2; 4,096 tokens for Llama 2, whose
    rotary positions have no table), so that a longer context is visibly a what-if.
    """

    name: str
    family: str
    d_model: int
    num_heads: int
    num_layers: int
    d_ff: int
    vocab_size: int
    num_kv_heads: int | None = None
    max_positions: int = 0
    bias: bool = True
    published_params: int | None = None
    paper_params: str = ""
    train_context: int = 0

    def __post_init__(self):
        if self.family not in {"bert", "gpt2", "llama"}:
            raise ValueError(f"family must be 'bert', 'gpt2' or 'llama', found {self.family!r}")
        attention_params(self.d_model, self.num_heads, self.num_kv_heads)  # validates the sizes

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads

    @property
    def kv_heads(self) -> int:
        """G: key/value heads (H for multi-head attention)."""
        return self.num_heads if self.num_kv_heads is None else self.num_kv_heads


#: BERT (Devlin et al. 2019) and GPT-2 (Radford et al. 2019) as released. The GPT-2 paper's
#: sizes (117M, 345M, 762M, 1542M) undercount the released models; OpenAI later renamed them
#: 124M, 355M, 774M and 1558M.
CLASSIC_CONFIGS = (
    ModelConfig(
        "BERT-base",
        "bert",
        768,
        12,
        12,
        3072,
        30522,
        max_positions=512,
        published_params=109_482_240,
        paper_params="110M",
        train_context=512,
    ),
    ModelConfig(
        "BERT-large",
        "bert",
        1024,
        16,
        24,
        4096,
        30522,
        max_positions=512,
        published_params=335_141_888,
        paper_params="340M",
        train_context=512,
    ),
    ModelConfig(
        "GPT-2 small",
        "gpt2",
        768,
        12,
        12,
        3072,
        50257,
        max_positions=1024,
        published_params=124_439_808,
        paper_params="117M",
        train_context=1024,
    ),
    ModelConfig(
        "GPT-2 medium",
        "gpt2",
        1024,
        16,
        24,
        4096,
        50257,
        max_positions=1024,
        published_params=354_823_168,
        paper_params="345M",
        train_context=1024,
    ),
    ModelConfig(
        "GPT-2 large",
        "gpt2",
        1280,
        20,
        36,
        5120,
        50257,
        max_positions=1024,
        published_params=774_030_080,
        paper_params="762M",
        train_context=1024,
    ),
    ModelConfig(
        "GPT-2 XL",
        "gpt2",
        1600,
        25,
        48,
        6400,
        50257,
        max_positions=1024,
        published_params=1_557_611_200,
        paper_params="1542M",
        train_context=1024,
    ),
)

#: Llama 2 7B (multi-head attention) and 70B (grouped-query attention, 8 KV heads), the pair the
#: KV-cache section compares. Attention projections have no biases. Both were trained with a
#: 4,096-token context (Touvron et al. 2023).
LLAMA2_CONFIGS = (
    ModelConfig(
        "Llama-2-7B",
        "llama",
        4096,
        32,
        32,
        11008,
        32000,
        bias=False,
        published_params=6_738_415_616,
        paper_params="7B",
        train_context=4096,
    ),
    ModelConfig(
        "Llama-2-70B",
        "llama",
        8192,
        64,
        80,
        28672,
        32000,
        num_kv_heads=8,
        bias=False,
        published_params=68_976_648_192,
        paper_params="70B",
        train_context=4096,
    ),
)


def config(name: str) -> ModelConfig:
    """The configuration called ``name`` (e.g. ``"GPT-2 XL"``)."""
    for cfg in CLASSIC_CONFIGS + LLAMA2_CONFIGS:
        if cfg.name == name:
            return cfg
    names = [c.name for c in CLASSIC_CONFIGS + LLAMA2_CONFIGS]
    raise ValueError(f"name must be one of {names}, found {name!r}")
