"""Deduplication: exact duplicates by a hash of the normalised document, near-duplicates by MinHash.

MinHash (Broder 1997): a document is its set of character k-shingles; each of n hash functions
h_i(x) = (a_i * x + b_i) mod p, applied to a shingle's base hash, keeps its minimum over the set.
The fraction of hash functions on which two signatures agree estimates the Jaccard similarity
|A & B| / |A | B| of the shingle sets, with standard error sqrt(J (1 - J) / n). The agreement
probability equals J exactly only for a min-wise independent family (Broder, Charikar, Frieze &
Mitzenmacher 1998); the linear family here is only approximately min-wise independent (Bohman,
Cooper & Frieze 2000), so the estimate is approximately unbiased. LSH banding (Leskovec,
Rajaraman & Ullman, Mining of Massive Datasets, ch. 3.4) splits a signature into b bands of r
rows; documents sharing any whole band become candidate pairs, which are then checked. A pair of
similarity s becomes a candidate with probability 1 - (1 - s^r)^b (lsh_candidate_probability).

Quality heuristics: duplicated_ngram_fraction, the share of a document's characters inside word
n-grams that occur more than once in it (the kind of repetition heuristic Llama 3's web
curation applies, section 3.1.1).

Everything is deterministic: a shingle's base hash is a fixed function of its bytes (blake2b,
not Python's salted hash), and the (a, b) family comes from np.random.default_rng(seed).

Legend: S shingles of one document, n hash functions, D documents.
"""

import hashlib
import re

import numpy as np

MERSENNE_P = (1 << 31) - 1  # the prime modulus: a, x < 2^31, so a * x + b fits in uint64 exactly


# ---------------------------------------------------------------------------
# Exact duplicates


def normalise_for_dedup(text):
    """Lower case, whitespace runs to one space, stripped: what counts as 'the same text'."""
    return re.sub(r"\s+", " ", text.lower()).strip()


def exact_hash(text):
    """A stable hex digest of the normalised text."""
    return hashlib.blake2b(normalise_for_dedup(text).encode("utf-8"), digest_size=16).hexdigest()


def exact_duplicate_groups(docs):
    """Groups (lists of indices, each of size >= 2) of documents whose normalised texts are equal."""
    groups = {}
    for i, doc in enumerate(docs):
        groups.setdefault(exact_hash(doc), []).append(i)
    return [g for g in groups.values() if len(g) > 1]


# ---------------------------------------------------------------------------
# Shingles and MinHash


def shingles(text, k=5):
    """The set of k-character substrings of the normalised text (the text itself if shorter)."""
    t = normalise_for_dedup(text)
    if len(t) <= k:
        return {t} if t else set()
    return {t[i:i + k] for i in range(len(t) - k + 1)}


def jaccard(a, b):
    """Exact Jaccard similarity of two sets; 1.0 for two empty sets."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def _base_hashes(shingle_set):
    """(S,) uint64 base hashes below 2^31 - 1, from each shingle's bytes."""
    return np.array(
        [int.from_bytes(hashlib.blake2b(s.encode("utf-8"), digest_size=8).digest(), "little") % MERSENNE_P
         for s in sorted(shingle_set)], dtype=np.uint64)


def hash_family(n, seed=0):
    """n pairs (a, b) with 1 <= a < p, 0 <= b < p, drawn once from a seeded generator."""
    rng = np.random.default_rng(seed)
    a = rng.integers(1, MERSENNE_P, size=n, dtype=np.uint64)
    b = rng.integers(0, MERSENNE_P, size=n, dtype=np.uint64)
    return a, b


def minhash_signature(shingle_set, family):
    """(n,) uint64 signature: for each hash function, the minimum of (a x + b) mod p over the shingles."""
    a, b = family
    if not shingle_set:
        return np.full(a.shape, MERSENNE_P, dtype=np.uint64)
    x = _base_hashes(shingle_set)  # (S,)
    h = (a[:, None] * x[None, :] + b[:, None]) % np.uint64(MERSENNE_P)  # (n, S), < 2^62 before the mod
    return h.min(axis=1)


def estimated_jaccard(sig_a, sig_b):
    """The fraction of hash functions on which two signatures agree."""
    return float(np.mean(sig_a == sig_b))


# ---------------------------------------------------------------------------
# Near-duplicates over a collection


def lsh_candidates(signatures, bands):
    """Pairs (i, j), i < j, that agree on every row of at least one band."""
    sigs = np.asarray(signatures)  # (D, n)
    D, n = sigs.shape
    rows = n // bands
    pairs = set()
    for band in range(bands):
        buckets = {}
        for i in range(D):
            buckets.setdefault(sigs[i, band * rows:(band + 1) * rows].tobytes(), []).append(i)
        for members in buckets.values():
            pairs.update((members[x], members[y]) for x in range(len(members)) for y in range(x + 1, len(members)))
    return sorted(pairs)


def lsh_candidate_probability(s, bands, rows):
    """P(a pair of Jaccard similarity s shares at least one whole band): 1 - (1 - s^rows)^bands.

    Under the idealised model in which each row agrees independently with probability s."""
    return 1.0 - (1.0 - s ** rows) ** bands


def near_duplicate_pairs(docs, threshold=0.8, k=5, n_hashes=64, bands=16, seed=0, min_chars=0):
    """[(i, j, estimated J, exact J)] of documents whose MinHash estimate is >= threshold.

    Candidates come from LSH banding, then each is checked on the full signature; the exact
    Jaccard is reported beside the estimate. Documents shorter than min_chars are skipped.
    """
    family = hash_family(n_hashes, seed)
    sets = [shingles(d, k) for d in docs]
    keep = [i for i, d in enumerate(docs) if len(normalise_for_dedup(d)) >= min_chars]
    sigs = np.stack([minhash_signature(sets[i], family) for i in keep]) if keep else np.zeros((0, n_hashes))
    out = []
    for a, b in lsh_candidates(sigs, bands):
        est = estimated_jaccard(sigs[a], sigs[b])
        if est >= threshold:
            i, j = keep[a], keep[b]
            out.append((i, j, est, jaccard(sets[i], sets[j])))
    return out


# ---------------------------------------------------------------------------
# A quality heuristic


def duplicated_ngram_fraction(text, n=5):
    """The fraction of a document's word characters that lie inside a word n-gram occurring 2+ times in it.

    Words are whitespace-separated after normalise_for_dedup; each word's characters count once,
    however many repeated n-grams cover it. 0.0 for a document of fewer than n words."""
    words = normalise_for_dedup(text).split()
    if len(words) < n:
        return 0.0
    grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    counts = {}
    for g in grams:
        counts[g] = counts.get(g, 0) + 1
    covered = np.zeros(len(words), dtype=bool)
    for i, g in enumerate(grams):
        if counts[g] > 1:
            covered[i:i + n] = True
    lengths = np.array([len(w) for w in words])
    return float(lengths[covered].sum() / lengths.sum())


# ---------------------------------------------------------------------------
# One pair, every intermediate (the chapter's dedup widget)


def lsh_shared_bands(sig_a, sig_b, bands):
    """Indices of the bands (rows = n // bands each; any leftover hashes are unused) on which two
    signatures agree in every row: the pair is an LSH candidate iff this is non-empty."""
    rows = sig_a.size // bands
    agree = (sig_a[:bands * rows] == sig_b[:bands * rows]).reshape(bands, rows)  # (b, r)
    return np.flatnonzero(agree.all(axis=1)).tolist()


def compare_pair(text_a, text_b, k=5, n_hashes=64, bands=16, threshold=0.5, seed=0, curve_points=101):
    """Everything the dedup pipeline computes for one pair, as a dict of plain Python values.

    normalised texts; each text's shingle set (sorted) and the shared ones; exact Jaccard; the
    MinHash estimate from n_hashes functions and its standard error sqrt(J (1 - J) / n); the
    bands x rows split, the bands the signatures share, P(candidate) = 1 - (1 - J^r)^b at the exact
    J, and that curve over s in [0, 1]; and the verdict as near_duplicate_pairs would reach it
    (candidate from a shared band, then kept if the estimate is >= threshold). exact_duplicate:
    the normalised texts are equal (exact_hash), which the exact pass would already have caught.
    """
    rows = n_hashes // bands
    sa, sb = shingles(text_a, k), shingles(text_b, k)
    family = hash_family(n_hashes, seed)
    sig_a, sig_b = minhash_signature(sa, family), minhash_signature(sb, family)
    J = jaccard(sa, sb)
    est = estimated_jaccard(sig_a, sig_b)
    shared_bands = lsh_shared_bands(sig_a, sig_b, bands)
    candidate = bool(shared_bands)
    if exact_hash(text_a) == exact_hash(text_b):
        verdict = "exact duplicate"
    elif candidate and est >= threshold:
        verdict = "near duplicate"
    elif candidate:
        verdict = "candidate, but its estimate is below the threshold"
    elif est >= threshold:
        verdict = "missed: the estimate is above the threshold, but no band is shared"
    else:
        verdict = "not a candidate"
    s = np.linspace(0.0, 1.0, curve_points)
    return {
        "normalised": [normalise_for_dedup(text_a), normalise_for_dedup(text_b)],
        "shingles": [sorted(sa), sorted(sb)], "shared": sorted(sa & sb),
        "n_shingles": [len(sa), len(sb)], "n_shared": len(sa & sb), "n_union": len(sa | sb),
        "jaccard": J, "estimate": est, "agreeing": int(np.sum(sig_a == sig_b)),
        "standard_error": float(np.sqrt(J * (1 - J) / n_hashes)),
        "k": k, "n_hashes": n_hashes, "bands": bands, "rows": rows, "unused_hashes": n_hashes - bands * rows,
        "shared_bands": shared_bands, "candidate": candidate,
        "p_candidate": lsh_candidate_probability(J, bands, rows),
        "p_candidate_at_threshold": lsh_candidate_probability(threshold, bands, rows),
        "curve_s": s.tolist(), "curve_p": lsh_candidate_probability(s, bands, rows).tolist(),
        "threshold": threshold, "exact_duplicate": verdict == "exact duplicate", "verdict": verdict,
    }
