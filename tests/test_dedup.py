"""Deduplication: exact duplicates after normalisation, and MinHash's estimate against exact Jaccard."""

import math

import numpy as np

from pylib.studies import dedup


def test_exact_duplicates_ignore_case_and_whitespace():
    docs = ["To be, or not\nto be.", "to be,  or not to be.", "To be or not to be.", "Other."]
    assert dedup.exact_duplicate_groups(docs) == [[0, 1]]


def test_shingles_of_a_short_text():
    assert dedup.shingles("abcdef", 5) == {"abcde", "bcdef"}
    assert dedup.shingles("Ab", 5) == {"ab"}
    assert dedup.shingles("  ", 5) == set()


def constructed_pair(n_shared, n_only_a, n_only_b):
    """Two sets with a known Jaccard similarity n_shared / (n_shared + n_only_a + n_only_b)."""
    shared = {f"s{i:05d}" for i in range(n_shared)}
    return shared | {f"a{i:05d}" for i in range(n_only_a)}, shared | {f"b{i:05d}" for i in range(n_only_b)}


def test_minhash_estimates_jaccard_within_its_standard_error():
    # Several constructed pairs with exact J from 0.1 to 0.9; with n = 512 hash functions the
    # estimate's standard error is sqrt(J (1 - J) / n) <= 0.022; allow 4 of them.
    family = dedup.hash_family(512, seed=0)
    for shared, only_a, only_b in [(100, 450, 450), (300, 200, 200), (500, 100, 100), (900, 50, 50), (400, 0, 100)]:
        a, b = constructed_pair(shared, only_a, only_b)
        exact = dedup.jaccard(a, b)
        est = dedup.estimated_jaccard(dedup.minhash_signature(a, family), dedup.minhash_signature(b, family))
        se = math.sqrt(exact * (1 - exact) / 512)
        assert abs(est - exact) <= 4 * se + 1e-12, (exact, est)


def test_minhash_identical_sets_agree_everywhere_and_disjoint_sets_almost_nowhere():
    family = dedup.hash_family(128, seed=3)
    a, b = constructed_pair(0, 300, 300)
    sig_a = dedup.minhash_signature(a, family)
    assert dedup.estimated_jaccard(sig_a, dedup.minhash_signature(set(a), family)) == 1.0
    assert dedup.estimated_jaccard(sig_a, dedup.minhash_signature(b, family)) <= 0.03


def test_minhash_is_deterministic():
    a, _ = constructed_pair(50, 50, 0)
    s1 = dedup.minhash_signature(a, dedup.hash_family(64, seed=7))
    s2 = dedup.minhash_signature(a, dedup.hash_family(64, seed=7))
    np.testing.assert_array_equal(s1, s2)


def test_near_duplicates_found_and_unrelated_texts_not():
    base = "Now is the winter of our discontent made glorious summer by this sun of York. " * 3
    docs = [base, base.replace("glorious", "glorius"), "Friends, Romans, countrymen, lend me your ears; " * 4]
    pairs = dedup.near_duplicate_pairs(docs, threshold=0.7, n_hashes=128, bands=32)
    assert [(i, j) for i, j, _, _ in pairs] == [(0, 1)]
    _, _, est, exact = pairs[0]
    assert exact > 0.8 and abs(est - exact) < 0.15


def test_lsh_candidate_probability_matches_a_simulation_of_banding():
    # Rows agree independently with probability s; a pair is a candidate if some band agrees in full.
    rng = np.random.default_rng(0)
    s, bands, rows = 0.5, 16, 4
    agree = rng.random((200_000, bands, rows)) < s
    simulated = agree.all(axis=2).any(axis=1).mean()
    p = dedup.lsh_candidate_probability(s, bands, rows)
    assert abs(simulated - p) < 4 * math.sqrt(p * (1 - p) / 200_000)
    assert dedup.lsh_candidate_probability(1.0, bands, rows) == 1.0
    assert dedup.lsh_candidate_probability(0.0, bands, rows) == 0.0


def test_duplicated_ngram_fraction_counts_repeated_word_ngrams():
    assert dedup.duplicated_ngram_fraction("one two three four five six") == 0.0
    assert dedup.duplicated_ngram_fraction("a b c d e a b c d e") == 1.0
    # "x y z w v" repeats; "q" and "r" are in no repeated 5-gram: 10 of 12 characters covered
    assert dedup.duplicated_ngram_fraction("x y z w v q x y z w v r") == 10 / 12
    assert dedup.duplicated_ngram_fraction("short text") == 0.0


def test_compare_pair_agrees_with_the_collection_functions():
    # compare_pair's numbers are the ones the chapter's pipeline computes: shingles, jaccard,
    # minhash_signature, lsh_candidates and near_duplicate_pairs on the same two documents.
    base = "Now is the winter of our discontent made glorious summer by this sun of York."
    pairs = [(base, base.replace("glorious", "glorius")), (base, base.upper() + "  "),
             (base, "Friends, Romans, countrymen, lend me your ears."), (base, base[:40])]
    for a, b in pairs:
        for n, bands, threshold in [(64, 16, 0.5), (128, 32, 0.8), (7, 3, 0.3)]:
            r = dedup.compare_pair(a, b, k=5, n_hashes=n, bands=bands, threshold=threshold, seed=0)
            sa, sb = dedup.shingles(a, 5), dedup.shingles(b, 5)
            assert r["jaccard"] == dedup.jaccard(sa, sb)
            assert (r["n_shared"], r["n_union"]) == (len(sa & sb), len(sa | sb))
            family = dedup.hash_family(n, 0)
            sigs = np.stack([dedup.minhash_signature(sa, family), dedup.minhash_signature(sb, family)])
            assert r["estimate"] == dedup.estimated_jaccard(*sigs) == r["agreeing"] / n
            assert r["candidate"] == (dedup.lsh_candidates(sigs, bands) == [(0, 1)])
            assert r["rows"] == n // bands and r["unused_hashes"] == n - bands * (n // bands)
            found = dedup.near_duplicate_pairs([a, b], threshold=threshold, k=5, n_hashes=n, bands=bands, seed=0)
            assert (r["verdict"] in ("near duplicate", "exact duplicate")) == (len(found) == 1)
            assert r["p_candidate"] == dedup.lsh_candidate_probability(r["jaccard"], bands, n // bands)
    assert dedup.compare_pair(base, base.upper() + "  ")["verdict"] == "exact duplicate"


def test_lsh_shared_bands_are_the_bands_agreeing_in_every_row():
    a = np.array([1, 2, 3, 4, 5, 6, 7], dtype=np.uint64)
    b = np.array([1, 2, 0, 4, 5, 6, 0], dtype=np.uint64)
    assert dedup.lsh_shared_bands(a, b, 3) == [0, 2]  # 2 rows: bands (1,2) (3,4) (5,6); hash 7 unused
    assert dedup.lsh_shared_bands(a, b, 7) == [0, 1, 3, 4, 5]
    assert dedup.lsh_shared_bands(a, b, 1) == []


def test_compare_pair_curve_is_the_s_curve_and_handles_emoji_and_short_texts():
    r = dedup.compare_pair("🎭🎭 <b>x</b>", "🎭", k=5, n_hashes=64, bands=16)
    assert r["shingles"][1] == ["🎭"] and r["jaccard"] == 0.0 and r["verdict"] == "not a candidate"
    s, p = np.array(r["curve_s"]), np.array(r["curve_p"])
    assert s[0] == 0 and s[-1] == 1 and p[0] == 0 and p[-1] == 1 and np.all(np.diff(p) >= 0)
    np.testing.assert_allclose(p, 1 - (1 - s ** 4) ** 16)
