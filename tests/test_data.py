"""pylib.data: plays to scenes, the vocabulary rule, the split by play, windows and batches."""

import numpy as np
import pytest

from pylib import data

SCENE_MD = """# A Play

## ACT I

### SCENE I. A street.

_Enter ROMEO and
JULIET_

**ROMEO**  
But soft, what light \\[Aside] through yonder  
window breaks?

**JULIET**  
[Within]_  
Ay me.

*Exit.*

### SCENE II. A garden.

**ROMEO**  
Good night.
"""


def test_play_to_scenes_gives_one_document_per_scene_in_speaker_form():
    scenes = data.play_to_scenes(SCENE_MD)
    assert scenes == ["ROMEO:\nBut soft, what light through yonder\nwindow breaks?\n\nJULIET:\nAy me.\n",
                      "ROMEO:\nGood night.\n"]


def test_vocab_keeps_most_frequent_chars_and_drops_the_rest():
    vocab = data.build_char_vocab("aaabbc", n_chars=2)
    assert vocab.chars == ("a", "b") and vocab.size == 3 and vocab.eos_id == 2
    ids, dropped = vocab.encode("abcab")
    assert ids.tolist() == [0, 1, 0, 1] and dropped == 1
    assert vocab.decode([0, 2, 1]) == "a" + data.EOS_DISPLAY + "\n\nb"


def test_normalise_text_folds_accents_and_dashes():
    assert data.normalise_text("café—naïve") == "cafe--naive"


def test_emoji_and_markup_are_plain_characters_to_the_vocabulary():
    vocab = data.build_char_vocab("<b>hi</b>", n_chars=64)
    ids, dropped = vocab.encode("<b>hi</b> 🎭")
    assert dropped == 2 and vocab.decode(ids) == "<b>hi</b>"  # the space and the emoji are unseen


def test_pack_documents_ends_every_document_with_eos():
    vocab = data.build_char_vocab("ab", n_chars=64)
    packed, dropped = data.pack_documents(["ab", "b"], vocab)
    assert packed.dtype == np.uint8 and dropped == 0
    assert packed.tolist() == [0, 1, vocab.eos_id, 1, vocab.eos_id]


def test_get_batch_targets_are_inputs_shifted_by_one():
    tokens = np.arange(100) % 7
    x, y = data.get_batch(tokens, 4, 8, np.random.default_rng(0))
    assert x.shape == y.shape == (4, 8)
    assert np.array_equal(x[:, 1:], y[:, :-1])


def test_eval_windows_are_fixed_and_cover_the_text():
    tokens = np.arange(1000) % 11
    x1, y1 = data.eval_windows(tokens, 5, 16)
    x2, _ = data.eval_windows(tokens, 5, 16)
    assert np.array_equal(x1, x2) and x1.shape == (5, 16)
    assert np.array_equal(x1[:, 1:], y1[:, :-1])


def test_windows_need_enough_tokens():
    with pytest.raises(ValueError, match="need at least"):
        data.get_batch(np.arange(10), 2, 64, np.random.default_rng(0))


def test_unigram_loss_of_uniform_text_is_ln_v():
    tokens = np.tile(np.arange(4), 100)
    assert data.unigram_loss(tokens, tokens, 4) == pytest.approx(np.log(4), rel=1e-3)


@pytest.fixture(scope="module")
def corpus(shared_corpus):
    return shared_corpus


def test_corpus_is_split_by_play_with_v_65(corpus):
    s = corpus.stats
    assert corpus.vocab.size == 65
    assert set(s["train_plays"]).isdisjoint(s["val_plays"])
    assert len(s["train_plays"]) + len(s["val_plays"]) == len(data.read_plays())
    assert s["val_tokens"] > 0 and s["train_tokens"] > 5 * s["val_tokens"]
    assert corpus.train.max() == corpus.vocab.eos_id  # documents end with EOS


def test_corpus_is_deterministic(corpus):
    again = data.build_corpus()
    assert np.array_equal(again.train, corpus.train) and np.array_equal(again.val, corpus.val)
    assert again.stats == corpus.stats
