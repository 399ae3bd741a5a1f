"""Build a tiny LLMLingua-2-shaped BERT token classifier on disk, offline, deterministically.

llmlingua picks its code path from the model name, so the directory name contains
``bert-base-multilingual-cased``. The weights are random but seeded: the test exercises
llmlingua's real loading and compression code, not the quality of a trained model.
"""

from __future__ import annotations

from pathlib import Path

_WORD_TEXT = """
    the a an of to and in on for with is was are be by at from that this it as or not report
    revenue grew quarter company customers team meeting budget project plan data model
    results table code function value error said will would can should more less first
    second third year month week day new old big small good bad high low market sales growth
    cost price users service system product release version update note we they he she our
    their which who what when where why how because but so if then Paris London Acme Berlin
    Alice Bob March April Monday
"""
WORDS = tuple(_WORD_TEXT.split())
PIECES = ("##s", "##ed", "##ing", "##ly", "##er", "##est", "##al", "##ion")
PUNCT = tuple(".,;:!?()[]{}'\"-_/\\@#$%&*+=<>|`~^")
DIGITS = tuple("0123456789") + tuple(f"##{d}" for d in "0123456789")
LETTERS = tuple("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
SUBLETTERS = tuple(f"##{c}" for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def vocabulary() -> list[str]:
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    seen: dict[str, None] = dict.fromkeys(
        specials
        + list(WORDS)
        + list(PIECES)
        + list(PUNCT)
        + list(DIGITS)
        + list(LETTERS)
        + list(SUBLETTERS)
    )
    return list(seen)


def build_tiny_model(parent: Path) -> Path:
    """Write config, weights and a WordPiece tokenizer under `parent`; return the directory."""
    import torch
    from transformers import BertConfig, BertForTokenClassification, BertTokenizerFast

    folder = parent / "tiny-bert-base-multilingual-cased-test"
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {token: index for index, token in enumerate(vocabulary())}
    # transformers 5 takes the WordPiece vocabulary as a dict (`vocab=`), not a file path.
    tokenizer = BertTokenizerFast(vocab=vocab, do_lower_case=False)
    tokenizer.save_pretrained(str(folder))
    config = BertConfig(
        vocab_size=len(vocabulary()),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=2,
        architectures=["BertForTokenClassification"],
    )
    torch.manual_seed(0)
    model = BertForTokenClassification(config)
    model.save_pretrained(str(folder))
    return folder
