/*
 * fuzzy_string maths: normalisation and bit-parallel Levenshtein distance.
 *
 * Normalisation is NFKC (utf8proc), then full Unicode case folding applied to
 * each code point of the NFKC text (so "ß" and "ss" match, as with Python's
 * unicodedata.normalize("NFKC", s).casefold()), then every run of whitespace
 * collapsed to one U+0020 and the ends trimmed. Whitespace is the Unicode
 * White_Space property plus U+001C..U+001F (which Python's str.split() also
 * treats as separators); NBSP, the ideographic space and the other fixed-width
 * spaces are already U+0020 after NFKC.
 *
 * The distance uses Myers' bit-vector algorithm in Hyyrö's blocked form. The
 * shorter string (the "pattern", m code points) is cut into blocks of 64 rows;
 * blocks are processed one after another, each sweeping every column of the
 * longer string (the "text", n code points). Between blocks, the horizontal
 * difference D[i][j] - D[i][j-1] along the block's bottom row is carried in two
 * n-bit vectors (+1 and -1). Code points are remapped to a dense alphabet of the
 * pattern's distinct code points (sorted, unique); a text code point absent
 * from the pattern gets the extra id sigma whose match mask is always zero.
 * Each block's match masks are set in one array indexed by alphabet id, only
 * for that block's <= 64 rows, and cleared before the next block. Memory is
 * O(n + m + sigma); time is O(ceil(m/64) * n).
 *
 * For speed, several consecutive blocks (a "stripe") share one sweep over the
 * text: 4 blocks interleaved in portable C, or 8 blocks as an AVX2 wavefront
 * (chosen at run time when the CPU has AVX2). Their masks sit side by side in
 * the same array (4 or 8 per alphabet id), set for the stripe's rows and
 * cleared afterwards, so memory stays O(n + m + sigma).
 */
#include "fuzzy.h"
#include "util.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* Strict UTF-8 check (no overlongs, no surrogates, nothing above U+10FFFF). */
static bool utf8_valid(const unsigned char *s, size_t len)
{
	size_t i = 0;
	while (i < len) {
		unsigned char c = s[i];
		size_t need;
		uint32_t cp, min;
		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xC2 && c <= 0xDF) {
			need = 1; cp = c & 0x1F; min = 0x80;
		} else if (c >= 0xE0 && c <= 0xEF) {
			need = 2; cp = c & 0x0F; min = 0x800;
		} else if (c >= 0xF0 && c <= 0xF4) {
			need = 3; cp = c & 0x07; min = 0x10000;
		} else {
			return false;
		}
		if (len - i <= need)
			return false;
		for (size_t k = 1; k <= need; k++) {
			unsigned char cc = s[i + k];
			if ((cc & 0xC0) != 0x80)
				return false;
			cp = (cp << 6) | (cc & 0x3F);
		}
		if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return false;
		i += need + 1;
	}
	return true;
}

static bool is_space(int32_t c)
{
	switch (c) {
	case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D:
	case 0x1C: case 0x1D: case 0x1E: case 0x1F: case 0x20:
	case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
	case 0x202F: case 0x205F: case 0x3000:
		return true;
	default:
		return c >= 0x2000 && c <= 0x200A;
	}
}

static bool is_ascii(const unsigned char *s, size_t len)
{
	unsigned char acc = 0;
	for (size_t i = 0; i < len; i++)
		acc |= s[i];
	return acc < 0x80;
}

/* ASCII text is already NFKC and folds by mapping A-Z to a-z: skip utf8proc. */
static int normalize_ascii(const char *s, size_t len, int32_t **cps, size_t *n)
{
	int32_t *out = xmalloc(len * sizeof *out);
	size_t w = 0;
	bool pending_space = false;
	for (size_t i = 0; i < len; i++) {
		int32_t c = (unsigned char)s[i];
		if (is_space(c)) {
			pending_space = w > 0;
			continue;
		}
		if (pending_space)
			out[w++] = 0x20;
		pending_space = false;
		out[w++] = (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c;
	}
	*cps = out;
	*n = w;
	return 0;
}

int fuzzy_normalize(const char *s, size_t len, int32_t **cps, size_t *n)
{
	const utf8proc_option_t nfkc = UTF8PROC_COMPAT | UTF8PROC_COMPOSE | UTF8PROC_STABLE;
	utf8proc_int32_t *buf, *out;
	utf8proc_ssize_t need, got;
	size_t cap, w = 0;
	bool pending_space = false;

	*cps = NULL;
	*n = 0;
	if (len > 0 && !s)
		return -1;
	/* The size bound keeps utf8proc's signed sizes (up to 18 code points per byte) in range. */
	if (!utf8_valid((const unsigned char *)s, len) || len > (size_t)PTRDIFF_MAX / 128)
		return -1;
	if (len == 0) {
		*cps = xmalloc(sizeof **cps);
		return 0;
	}
	if (is_ascii((const unsigned char *)s, len))
		return normalize_ascii(s, len, cps, n);

	/* NFKC: decompose (compatibility) + canonical order, then compose. */
	need = utf8proc_decompose((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)len, NULL, 0, nfkc);
	if (need < 0)
		return -1;
	buf = xmalloc(((size_t)need + 1) * sizeof *buf);
	got = utf8proc_decompose((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)len, buf, need, nfkc);
	if (got < 0 || got > need)
		goto fail;
	got = utf8proc_normalize_utf32(buf, got, nfkc);
	if (got < 0)
		goto fail;

	/* Case folding (full: one code point may become up to three), then whitespace. */
	cap = (size_t)got + 16;
	out = xmalloc(cap * sizeof *out);
	for (utf8proc_ssize_t i = 0; i < got; i++) {
		utf8proc_int32_t tmp[8];
		int bc = 0;
		utf8proc_ssize_t r = utf8proc_decompose_char(buf[i], tmp, 8, UTF8PROC_CASEFOLD, &bc);
		if (r < 0 || r > 8) {
			free(out);
			goto fail;
		}
		for (utf8proc_ssize_t j = 0; j < r; j++) {
			int32_t c = tmp[j];
			if (is_space(c)) {
				pending_space = w > 0;
				continue;
			}
			if (w + 2 > cap) {
				cap = cap * 2;
				out = xrealloc(out, cap * sizeof *out);
			}
			if (pending_space)
				out[w++] = 0x20;
			pending_space = false;
			out[w++] = c;
		}
	}
	free(buf);
	*cps = out;
	*n = w;
	return 0;
fail:
	free(buf);
	return -1;
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

/* Index of c in the sorted array alph[0..sigma), or sigma if absent. */
static uint32_t alpha_id(const int32_t *alph, uint32_t sigma, int32_t c)
{
	uint32_t lo = 0, hi = sigma;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (alph[mid] < c)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo < sigma && alph[lo] == c) ? lo : sigma;
}

static size_t popcount64(uint64_t x)
{
	return (size_t)__builtin_popcountll(x);
}

/* Masks per alphabet id: one per block of a stripe (4 for the portable sweep, 8 for AVX2). */
#define PEQ_STRIDE_MAX 8
/* Sentinel ids kept before and after the text's ids (the AVX2 wavefront reads ahead). */
#define TID_PAD 8

/*
 * One Myers step for a 64-row block at one text column (Hyyrö's formulation with a
 * horizontal input difference hin = +1 (hpi = 1), -1 (hni = 1) or 0). Updates the block's
 * vertical +1/-1 vectors and returns the horizontal difference leaving row `bit`.
 */
#define MYERS_STEP(eq_in, vp, vn, hpi, hni, bit, outp, outn) do { \
	uint64_t eq_ = (eq_in), v_ = (vp), xv_ = eq_ | (vn), xh_, ph_, mh_; \
	eq_ |= (hni); \
	xh_ = (((eq_ & v_) + v_) ^ v_) | eq_; \
	ph_ = (vn) | ~(xh_ | v_); \
	mh_ = v_ & xh_; \
	(outp) = (ph_ >> (bit)) & 1; \
	(outn) = (mh_ >> (bit)) & 1; \
	ph_ = (ph_ << 1) | (hpi); \
	mh_ = (mh_ << 1) | (hni); \
	(vp) = mh_ | ~(xv_ | ph_); \
	(vn) = ph_ & xv_; \
} while (0)

/*
 * One sweep over the text for a stripe of S consecutive blocks (S <= 4, a constant after
 * inlining), swept together column by column: block k+1 at column j needs only block k's
 * bottom-row difference at column j, so the CPU overlaps the blocks' dependency chains.
 * peq holds `stride` masks per alphabet id (mask k for block k of the stripe).
 * hp/hn carry, per text column, the +1/-1 horizontal differences entering the stripe's top
 * row; they are replaced with those leaving its bottom row. `last` is the bit of the bottom
 * row of the stripe's last block (63 unless it is the pattern's final, partial block).
 */
static inline __attribute__((always_inline))
void sweep(const uint64_t *peq, size_t stride, const uint32_t *tid, size_t n, uint64_t *hp,
           uint64_t *hn, const int S, unsigned last)
{
	uint64_t vp[4], vn[4];
	size_t nwords = (n + 63) / 64;

	/* Column 0: D[i][0] = i, every vertical difference is +1. */
	for (int k = 0; k < S; k++) {
		vp[k] = ~(uint64_t)0;
		vn[k] = 0;
	}
	for (size_t w = 0; w < nwords; w++) {
		uint64_t inp = hp[w], inn = hn[w], outp = 0, outn = 0;
		size_t cols = (w + 1 < nwords || n % 64 == 0) ? 64 : n % 64;
		const uint32_t *col = tid + w * 64;
		for (size_t c = 0; c < cols; c++) {
			const uint64_t *eqs = peq + (size_t)col[c] * stride;
			uint64_t hpi = (inp >> c) & 1, hni = (inn >> c) & 1;
			for (int k = 0; k < S; k++) {
				uint64_t op, on;
				MYERS_STEP(eqs[k], vp[k], vn[k], hpi, hni, k == S - 1 ? last : 63, op, on);
				hpi = op;
				hni = on;
			}
			outp |= hpi << c;
			outn |= hni << c;
		}
		hp[w] = outp;
		hn[w] = outn;
	}
}

#if defined(__x86_64__) && defined(__GNUC__)
#define FUZZY_HAVE_AVX2 1
#include <immintrin.h>

/*
 * The same sweep for a stripe of 8 full blocks with AVX2, as a wavefront: lane L of
 * (A = blocks 0-3, B = blocks 4-7) handles block L at column s - L during step s, so the
 * difference block L passes down at column j (step s) is what block L+1 needs at step s+1:
 * each step rotates the lanes' outputs up by one. Columns outside the text use the
 * sentinel id (mask 0) and a zero input, which leaves the initial state unchanged.
 * tidpad has TID_PAD sentinels before the text's ids and after them.
 */
__attribute__((target("avx2")))
static void sweep8_avx2(const uint64_t *peq, const uint32_t *tidpad, size_t n,
                        uint64_t *hp, uint64_t *hn)
{
	const __m256i ones = _mm256_set1_epi64x(-1), zero = _mm256_setzero_si256();
	const __m128i lane_a = _mm_set_epi32(3, 2, 1, 0), lane_b = _mm_set_epi32(7, 6, 5, 4);
	const long long *base = (const long long *)peq;
	const uint32_t *tp = tidpad + TID_PAD;     /* tp[j] = id of text column j, j in [-8, n+8) */
	__m256i vpa = ones, vna = zero, vpb = ones, vnb = zero;
	__m256i rpa = zero, rna = zero, rpb = zero, rnb = zero;   /* rotated outputs of last step */
	uint64_t inp = 0, inn = 0, outp = 0, outn = 0;

	for (size_t s = 0; s < n + 7; s++) {
		__m128i ia, ib;
		__m256i eqa, eqb, hpa, hna, hpb, hnb, xv, xh, ph, mh, opa, ona, opb, onb;
		uint64_t bp, bn;

		if ((s & 63) == 0 && s < n) {
			inp = hp[s >> 6];
			inn = hn[s >> 6];
		}
		bp = s < n ? (inp >> (s & 63)) & 1 : 0;
		bn = s < n ? (inn >> (s & 63)) & 1 : 0;
		/* Lane 0 of A takes the stripe's input at column s; lane 0 of B takes A's lane 3. */
		hpa = _mm256_blend_epi32(rpa, _mm256_castsi128_si256(_mm_cvtsi64_si128((long long)bp)), 0x03);
		hna = _mm256_blend_epi32(rna, _mm256_castsi128_si256(_mm_cvtsi64_si128((long long)bn)), 0x03);
		hpb = _mm256_blend_epi32(rpb, rpa, 0x03);
		hnb = _mm256_blend_epi32(rnb, rna, 0x03);

		/* Match masks (8 per id): lane L of A reads column s - L, lane L of B column s - 4 - L. */
		ia = _mm_loadu_si128((const __m128i *)(tp + s - 3));
		ia = _mm_add_epi32(_mm_slli_epi32(_mm_shuffle_epi32(ia, _MM_SHUFFLE(0, 1, 2, 3)), 3), lane_a);
		ib = _mm_loadu_si128((const __m128i *)(tp + s - 7));
		ib = _mm_add_epi32(_mm_slli_epi32(_mm_shuffle_epi32(ib, _MM_SHUFFLE(0, 1, 2, 3)), 3), lane_b);
		eqa = _mm256_i32gather_epi64(base, ia, 8);
		eqb = _mm256_i32gather_epi64(base, ib, 8);

#define STEP8(eq, vp, vn, hpi, hni, op, on) do { \
		xv = _mm256_or_si256(eq, vn); \
		eq = _mm256_or_si256(eq, hni); \
		xh = _mm256_or_si256(_mm256_xor_si256(_mm256_add_epi64(_mm256_and_si256(eq, vp), vp), vp), eq); \
		ph = _mm256_or_si256(vn, _mm256_andnot_si256(_mm256_or_si256(xh, vp), ones)); \
		mh = _mm256_and_si256(vp, xh); \
		op = _mm256_srli_epi64(ph, 63); \
		on = _mm256_srli_epi64(mh, 63); \
		ph = _mm256_or_si256(_mm256_slli_epi64(ph, 1), hpi); \
		mh = _mm256_or_si256(_mm256_slli_epi64(mh, 1), hni); \
		vp = _mm256_or_si256(mh, _mm256_andnot_si256(_mm256_or_si256(xv, ph), ones)); \
		vn = _mm256_and_si256(ph, xv); \
	} while (0)
		STEP8(eqa, vpa, vna, hpa, hna, opa, ona);
		STEP8(eqb, vpb, vnb, hpb, hnb, opb, onb);
#undef STEP8
		/* Lane L's output feeds lane L+1 next step; lane 3's wraps to lane 0. */
		rpa = _mm256_permute4x64_epi64(opa, _MM_SHUFFLE(2, 1, 0, 3));
		rna = _mm256_permute4x64_epi64(ona, _MM_SHUFFLE(2, 1, 0, 3));
		rpb = _mm256_permute4x64_epi64(opb, _MM_SHUFFLE(2, 1, 0, 3));
		rnb = _mm256_permute4x64_epi64(onb, _MM_SHUFFLE(2, 1, 0, 3));

		/* B's lane 3 (now lane 0 of rpb/rnb) finished column s - 7: the stripe's output. */
		if (s >= 7) {
			size_t c = s - 7;
			outp |= (uint64_t)_mm_cvtsi128_si64(_mm256_castsi256_si128(rpb)) << (c & 63);
			outn |= (uint64_t)_mm_cvtsi128_si64(_mm256_castsi256_si128(rnb)) << (c & 63);
			if ((c & 63) == 63 || c == n - 1) {
				hp[c >> 6] = outp;
				hn[c >> 6] = outn;
				outp = outn = 0;
			}
		}
	}
}

static bool have_avx2(void)
{
	static int cached = -1;      /* benign race: every thread computes the same value */
	if (cached < 0) {
		__builtin_cpu_init();
		cached = __builtin_cpu_supports("avx2") ? 1 : 0;
	}
	return cached == 1;
}
#endif

/* A pattern of 1..64 code points: one block, its alphabet and masks on the stack. */
static size_t lev_small(const int32_t *p, size_t m, const int32_t *t, size_t n)
{
	int32_t alph[64];
	uint64_t mask[64], vp = ~(uint64_t)0, vn = 0;
	uint32_t sigma = 0;
	size_t d = m;
	unsigned last = (unsigned)(m - 1);

	/* Sorted distinct code points (insertion sort) and their row masks. */
	for (size_t i = 0; i < m; i++) {
		uint32_t k = alpha_id(alph, sigma, p[i]);
		if (k == sigma) {
			uint32_t at = sigma;
			while (at > 0 && alph[at - 1] > p[i]) {
				alph[at] = alph[at - 1];
				mask[at] = mask[at - 1];
				at--;
			}
			alph[at] = p[i];
			mask[at] = 0;
			k = at;
			sigma++;
		}
		mask[k] |= (uint64_t)1 << i;
	}
	for (size_t j = 0; j < n; j++) {
		uint32_t k = alpha_id(alph, sigma, t[j]);
		uint64_t eq = k < sigma ? mask[k] : 0, op, on;
		/* Row 0 grows by one per column: the input difference is +1. */
		MYERS_STEP(eq, vp, vn, (uint64_t)1, (uint64_t)0, last, op, on);
		d = d + op - on;
	}
	return d;
}

static size_t levenshtein(const int32_t *a, size_t na, const int32_t *b, size_t nb, bool simd)
{
	const int32_t *p, *t;
	size_t m, n, nwords, nblocks, full, stride, pos = 0, neg = 0;
	int32_t *alph;
	uint32_t sigma = 0, *pid, *tidpad, *tid;
	uint64_t *peq, *hp, *hn;

	/* Pattern = the shorter string. */
	if (na <= nb) {
		p = a; m = na; t = b; n = nb;
	} else {
		p = b; m = nb; t = a; n = na;
	}
	/* A common prefix and suffix never change the distance. */
	while (m > 0 && p[0] == t[0]) {
		p++; t++; m--; n--;
	}
	while (m > 0 && p[m - 1] == t[n - 1]) {
		m--; n--;
	}
	if (m == 0)
		return n;
	if (m <= 64)
		return lev_small(p, m, t, n);

	/* Dense alphabet of the pattern's distinct code points. */
	alph = xmalloc(m * sizeof *alph);
	memcpy(alph, p, m * sizeof *alph);
	qsort(alph, m, sizeof *alph, cmp_i32);
	for (size_t i = 0; i < m; i++)
		if (sigma == 0 || alph[sigma - 1] != alph[i])
			alph[sigma++] = alph[i];
	pid = xmalloc(m * sizeof *pid);
	for (size_t i = 0; i < m; i++)
		pid[i] = alpha_id(alph, sigma, p[i]);
	/* The text's ids, with sentinel ids (sigma: no match anywhere) around them. */
	tidpad = xmalloc((n + 2 * TID_PAD) * sizeof *tidpad);
	tid = tidpad + TID_PAD;
	for (size_t i = 0; i < TID_PAD; i++)
		tidpad[i] = tid[n + i] = sigma;
	for (size_t j = 0; j < n; j++)
		tid[j] = alpha_id(alph, sigma, t[j]);
	free(alph);

	/* The AVX2 gather takes 32-bit indices id * 8 + lane. */
	simd = simd && sigma < ((uint32_t)1 << 27);
	/* `stride` masks per alphabet id, plus the all-zero id sigma. */
	stride = simd ? PEQ_STRIDE_MAX : 4;
	peq = xcalloc(((size_t)sigma + 1) * stride, sizeof *peq);
	nwords = (n + 63) / 64;
	hp = xmalloc(nwords * sizeof *hp);
	hn = xcalloc(nwords, sizeof *hn);
	/* Row 0: D[0][j] = j, every horizontal difference is +1. */
	for (size_t w = 0; w < nwords; w++)
		hp[w] = ~(uint64_t)0;
	if (n % 64)
		hp[nwords - 1] = ((uint64_t)1 << (n % 64)) - 1;

	nblocks = (m + 63) / 64;
	full = m / 64;
	for (size_t b0 = 0; b0 < nblocks;) {
		size_t left = nblocks - b0, nbk, r0 = b0 * 64, rows;
		bool wide = simd && b0 < full && full - b0 >= 8;
		unsigned last;

		nbk = wide ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
		rows = m - r0 < nbk * 64 ? m - r0 : nbk * 64;
		last = (unsigned)((rows - 1) % 64);
		/* This stripe's masks: only its <= nbk*64 rows are set, then cleared. */
		for (size_t i = 0; i < rows; i++)
			peq[(size_t)pid[r0 + i] * stride + i / 64] |= (uint64_t)1 << (i % 64);
		if (nbk == 4)
			sweep(peq, stride, tid, n, hp, hn, 4, last);
		else if (nbk == 2)
			sweep(peq, stride, tid, n, hp, hn, 2, last);
		else if (nbk == 1)
			sweep(peq, stride, tid, n, hp, hn, 1, last);
#ifdef FUZZY_HAVE_AVX2
		else
			sweep8_avx2(peq, tidpad, n, hp, hn);
#endif
		for (size_t i = 0; i < rows; i++)
			peq[(size_t)pid[r0 + i] * stride + i / 64] = 0;
		b0 += nbk;
	}

	/* D[m][n] = D[m][0] + sum of the bottom row's horizontal differences. */
	for (size_t w = 0; w < nwords; w++) {
		pos += popcount64(hp[w]);
		neg += popcount64(hn[w]);
	}
	free(hp);
	free(hn);
	free(peq);
	free(tidpad);
	free(pid);
	return m + pos - neg;
}

size_t fuzzy_levenshtein(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
#ifdef FUZZY_HAVE_AVX2
	return levenshtein(a, na, b, nb, have_avx2());
#else
	return levenshtein(a, na, b, nb, false);
#endif
}

size_t fuzzy_levenshtein_portable(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
	return levenshtein(a, na, b, nb, false);
}

int fuzzy_pair_init(struct fuzzy_pair *p, const char *a, size_t alen, const char *b,
                    size_t blen)
{
	memset(p, 0, sizeof *p);
	if (fuzzy_normalize(a, alen, &p->a, &p->na) < 0)
		return -1;
	if (fuzzy_normalize(b, blen, &p->b, &p->nb) < 0)
		return -1;
	/* A common prefix and suffix never change the distance: strip them, so near-identical
	 * long texts cost only their differing middle. */
	size_t pre = 0, suf = 0, na = p->na, nb = p->nb;
	while (pre < na && pre < nb && p->a[pre] == p->b[pre])
		pre++;
	while (suf < na - pre && suf < nb - pre && p->a[na - 1 - suf] == p->b[nb - 1 - suf])
		suf++;
	p->pre = pre;
	p->suf = suf;
	return 0;
}

void fuzzy_pair_middle(const struct fuzzy_pair *p, size_t *m, size_t *n)
{
	size_t x = p->na - p->pre - p->suf, y = p->nb - p->pre - p->suf;
	*m = x < y ? x : y;
	*n = x < y ? y : x;
}

int fuzzy_pair_score(const struct fuzzy_pair *p, int *score)
{
	size_t mx = p->na > p->nb ? p->na : p->nb, m, n;
	if (mx == 0) {
		*score = 1000;
		return 0;
	}
	fuzzy_pair_middle(p, &m, &n);
	if ((uint64_t)m * (uint64_t)n > FUZZY_MAX_CELLS)
		return -2;
	size_t d = fuzzy_levenshtein(p->a + p->pre, p->na - p->pre - p->suf, p->b + p->pre,
	                             p->nb - p->pre - p->suf);
	/* floor(1000 (mx - d) / mx + 1/2), exactly. */
	*score = (int)((2000 * (uint64_t)(mx - d) + mx) / (2 * (uint64_t)mx));
	return 0;
}

void fuzzy_pair_free(struct fuzzy_pair *p)
{
	free(p->a);
	free(p->b);
	p->a = p->b = NULL;
}

int fuzzy_score(const char *a, size_t alen, const char *b, size_t blen, int *score)
{
	struct fuzzy_pair p;
	int rc = fuzzy_pair_init(&p, a, alen, b, blen) < 0 ? -1 : fuzzy_pair_score(&p, score);
	fuzzy_pair_free(&p);
	return rc;
}
