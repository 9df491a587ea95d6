"""lutcore.tokenizer.Tokenizer: byte-level (256 ids), printable characters
(96 ids: '\\n' and ASCII 32..126, anything else -> '?'), and a Hugging Face
tokenizer.json (a tiny BPE trained here with the `tokenizers` library)."""
import json

import pytest

import lutcore
from lutcore.tokenizer import Tokenizer

SAMPLES = [
    "hello world",
    "héllo wörld — naïve café",
    "日本語のテキスト",
    "emoji 🙂🚀 and\ttabs\nand newlines\r\n",
    "",
    "\x00 nul and \x7f del",
]

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "the lazy dog sleeps while the quick fox runs",
    "a quick brown dog and a lazy brown fox",
    "foxes and dogs are quick and lazy in turn",
] * 5


@pytest.fixture(autouse=True)
def _one_thread():
    lutcore.set_num_threads(1)
    yield


# ------------------------------------------------------------------ bytes
@pytest.mark.parametrize("text", SAMPLES)
def test_bytes_round_trip(text):
    tok = Tokenizer.bytes()
    assert tok.vocab_size == 256
    ids = tok.encode(text)
    assert ids.dtype.kind in "iu"
    assert ids.tolist() == list(text.encode("utf-8"))
    assert ids.size == 0 or (ids.min() >= 0 and ids.max() < 256)
    assert tok.decode(ids) == text
    assert tok.decode(ids.tolist()) == text


def test_bytes_encode_rejects_non_str():
    with pytest.raises(TypeError):
        Tokenizer.bytes().encode(b"bytes")


# ------------------------------------------------------------------ chars
def test_chars_vocabulary():
    tok = Tokenizer.chars()
    assert tok.vocab_size == 96
    alphabet = "\n" + "".join(chr(c) for c in range(32, 127))
    assert len(alphabet) == 96
    ids = tok.encode(alphabet)
    assert sorted(ids.tolist()) == list(range(96))          # a bijection onto 0..95
    assert tok.decode(ids) == alphabet


def test_chars_unknown_becomes_question_mark():
    tok = Tokenizer.chars()
    q = tok.encode("?")[0]
    text = "café\tñ 🙂!"
    ids = tok.encode(text)
    assert ids.size == len(text)
    assert ids.min() >= 0 and ids.max() < 96
    assert tok.decode(ids) == "caf??? ?!"      # é, \t, ñ and 🙂 each -> ?
    for ch in "é\tñ🙂\r\x00":
        assert tok.encode(ch).tolist() == [q]


# ------------------------------------------------------------------ Hugging Face tokenizer.json
@pytest.fixture
def bpe_file(tmp_path):
    import tokenizers
    from tokenizers import models, pre_tokenizers, trainers, decoders
    hf = tokenizers.Tokenizer(models.BPE(unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    # alphabet = what the corpus holds (not all 256 bytes): a vocabulary small enough for the tiny model
    trainer = trainers.BpeTrainer(vocab_size=120, special_tokens=["[UNK]", "[PAD]"], show_progress=False)
    hf.train_from_iterator(CORPUS, trainer=trainer)
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    return path, hf


def test_bpe_from_file(bpe_file):
    path, hf = bpe_file
    tok = Tokenizer.from_file(path)
    assert tok.vocab_size == hf.get_vocab_size(with_added_tokens=True)
    assert tok.vocab_size <= 120
    for text in ["the quick brown fox", "lazy dogs run", "a fox and a dog in turn"]:
        ids = tok.encode(text)
        assert ids.tolist() == hf.encode(text).ids
        assert ids.max() < tok.vocab_size
        assert tok.decode(ids) == text
    # merges were learned: a frequent word is fewer tokens than bytes
    assert tok.encode("the quick brown fox").size < len("the quick brown fox")
    assert Tokenizer.from_file(str(path)).encode("quick").tolist() == tok.encode("quick").tolist()


def test_bpe_tokenizer_in_trainer_checkpoint(bpe_file, tmp_path):
    from lutcore.models.mamba import MambaConfig, MambaLM
    from lutcore.train import Trainer
    path, hf = bpe_file
    tok = Tokenizer.from_file(path)
    model = MambaLM(MambaConfig(d_model=16, n_layer=1, vocab_size=256, d_state=4))
    tr = Trainer(model, tokenizer=tok, lr=1e-2)
    tr.train(" ".join(CORPUS), epochs=1, seq_len=16, batch_size=4, max_steps=2)
    tr.save_checkpoint(tmp_path / "ck")
    back = Trainer.resume(tmp_path / "ck")
    assert back.tokenizer.vocab_size == tok.vocab_size
    text = "the quick brown fox"
    assert back.tokenizer.encode(text).tolist() == hf.encode(text).ids
    assert back.tokenizer.decode(back.tokenizer.encode(text)) == text


def test_tokenizer_larger_than_model_vocabulary_is_refused(bpe_file):
    from lutcore.models.mamba import MambaConfig, MambaLM
    from lutcore.train import Trainer
    path, _ = bpe_file
    model = MambaLM(MambaConfig(d_model=16, n_layer=1, vocab_size=64, d_state=4))
    with pytest.raises(ValueError):
        Trainer(model, tokenizer=Tokenizer.from_file(path))


@pytest.mark.parametrize("content", ["{not json", "{}", json.dumps({"model": {"type": "NoSuchModel"}}), ""])
def test_malformed_tokenizer_json(tmp_path, content):
    path = tmp_path / "broken-tokenizer.json"
    path.write_text(content)
    with pytest.raises(ValueError) as e:
        Tokenizer.from_file(path)
    assert str(path) in str(e.value)


def test_missing_tokenizer_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        Tokenizer.from_file(tmp_path / "nope" / "tokenizer.json")
    with pytest.raises(FileNotFoundError):
        Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
