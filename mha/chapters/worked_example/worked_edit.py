"""The worked example's two explorers: dog's word type and the temperature, and five words the reader picks.

The first explorer gives token 5 ("dog") another word type and changes the temperature
(:func:`explorer_example`). In the second, each word comes from a small vocabulary with a word type
(det, noun, verb). A sentence becomes the input X exactly as the chapter's own does
(:func:`mha.chapters.worked_example.worked.canonical_x`): row t is [type of word t | one-hot position t],
and the same hand-chosen weights then give every intermediate
(:func:`mha.chapters.worked_example.worked.worked_example`). Head 1 still finds the previous token (it
reads positions only); head 2 finds the words of the same type, so it is the one that changes.
"""

from __future__ import annotations

import dataclasses

import torch

from .worked import DTYPE, TOKENS, WorkedExample, canonical_x, edited_x, worked_example

# --------------------------------------------------------------------------------------------
# The explorer: pick dog's word type and the temperature
# --------------------------------------------------------------------------------------------

#: The word types the explorer can give token 5 ("dog"): its (det, noun, verb) features.
DOG_TYPES = {"noun": (0.0, 1.0, 0.0), "verb": (0.0, 0.0, 1.0), "det": (1.0, 0.0, 0.0), "none": (0.0, 0.0, 0.0)}
#: Controls of the chapter's explorer. Each opens on its first value, the page's own example
#: (dog is a noun, temperature 1); the temperature slider then goes towards sharper weights.
EXPLORER_CONTROLS = {"dog_type": list(DOG_TYPES), "temperature": [0.25, 0.5, 1]}
#: The explorers open on the page's own example: dog a noun, temperature 1.
EXPLORER_INITIAL = {"dog_type": "noun", "temperature": 1}


def explorer_example(dog_type: str = "noun", temperature: float = 1.0) -> WorkedExample:
    """The example with token 5 ("dog") given the word type ``dog_type`` and the given temperature."""
    if dog_type not in DOG_TYPES:
        raise ValueError(f"dog_type must be one of {list(DOG_TYPES)}, found {dog_type!r}")
    return worked_example(edited_x(*DOG_TYPES[dog_type], token=5), temperature=temperature)


def explorer_alt(dog_type: str = "noun", temperature: float = 1.0) -> str:
    """Alt text of one explorer frame: where dog looks in each head."""
    ex = explorer_example(dog_type, temperature)
    parts = []
    for h in range(ex.num_heads):
        row = ex.weights[h, 4]
        top = float(row.max())
        where = " and ".join(f"{j + 1} ({ex.tokens[j]})" for j in range(len(row)) if top - float(row[j]) < 1e-9)
        parts.append(f"head {h + 1}: dog's largest weight {top:.2f} on token {where}")
    return (
        f"Attention weights of both heads with dog of type {dog_type} and temperature {temperature:g}; "
        + "; ".join(parts)
        + "."
    )


#: The words the reader can use, with their word type.
VOCABULARY = {
    "the": "det",
    "a": "det",
    "cat": "noun",
    "dog": "noun",
    "mouse": "noun",
    "saw": "verb",
    "chased": "verb",
    "bit": "verb",
}
#: Each word type's (det, noun, verb) features, the first three columns of X.
TYPE_FEATURES = {"det": (1.0, 0.0, 0.0), "noun": (0.0, 1.0, 0.0), "verb": (0.0, 0.0, 1.0)}
#: The chapter's sentence and two edits the static book precomputes.
SENTENCES = ("the cat saw the dog", "the dog saw the cat", "a mouse bit the dog")


def vocabulary_text() -> str:
    """The vocabulary by type, as a message shows it: ``det: the, a; noun: cat, dog, mouse; ...``."""
    return "; ".join(f"{kind}: {', '.join(w for w, k in VOCABULARY.items() if k == kind)}" for kind in TYPE_FEATURES)


def parse_tokens(tokens) -> list[str]:
    """Five words of :data:`VOCABULARY` from a string (``"the cat saw the dog"``) or a list.

    A ValueError names what is wrong (how many words, which word is not in the vocabulary); a
    TypeError anything that is neither a string nor a list of strings.
    """
    if isinstance(tokens, str):
        words = tokens.lower().split()
    elif isinstance(tokens, (list, tuple)) and all(isinstance(t, str) for t in tokens):
        words = [t.strip().lower() for t in tokens]
    else:
        raise TypeError(f"tokens must be a string of {len(TOKENS)} words, found {type(tokens).__name__}")
    if len(words) != len(TOKENS):
        raise ValueError(f"tokens must be {len(TOKENS)} words, found {len(words)}: {' '.join(words)!r}")
    unknown = [w for w in words if w not in VOCABULARY]
    if unknown:
        raise ValueError(f"{unknown[0]!r} is not in the vocabulary; pick words from {vocabulary_text()}")
    return words


def sentence_x(tokens):
    """The input X for five words: their types, then the one-hot positions (the chapter's layout).

    Shapes: returns (T, D) = (5, 8).
    """
    words = parse_tokens(tokens)
    x = canonical_x()
    x[:, :3] = torch.tensor([TYPE_FEATURES[VOCABULARY[w]] for w in words], dtype=DTYPE)
    return x


def sentence_example(tokens="the cat saw the dog", temperature: float = 1.0) -> WorkedExample:
    """Every intermediate of the two-head example on the reader's five words."""
    words = parse_tokens(tokens)
    ex = worked_example(sentence_x(words), temperature=temperature)
    return dataclasses.replace(ex, tokens=words)


def sentence_alt(tokens="the cat saw the dog", temperature: float = 1.0) -> str:
    """Alt text of one frame: where the last word looks in each head."""
    ex = sentence_example(tokens, temperature)
    parts = []
    for h in range(ex.num_heads):
        row = ex.weights[h, -1]
        top = float(row.max())
        where = " and ".join(f"{j + 1} ({ex.tokens[j]})" for j in range(len(row)) if top - float(row[j]) < 1e-9)
        parts.append(f"head {h + 1} puts its largest weight {top:.2f} on {where}")
    return (
        f"Scores, weights, head outputs, concatenation and output for '{' '.join(ex.tokens)}' at "
        f"temperature {ex.temperature:g}; for the last word, " + "; ".join(parts) + "."
    )
