/* Compare two raw float32 weight files (mwtrain train --dump-weights).
 *   cmp_weights A B [max_rel [BASE]]    max_rel omitted or 0: must be bitwise equal
 * The relative difference is max_i |a_i - b_i| / max_i |a_i| (the max norm of
 * the difference over the max norm of the weights). With BASE (the weights both runs
 * started from, e.g. a --epochs 0 dump), it is max_i |a_i - b_i| / max_i |a_i - base_i|:
 * the difference over the largest distance training moved a weight, so that a difference
 * in the updates is not hidden behind the size of the weights (one SGD step of lr 1 is
 * then the gradient itself: a - base = -g up to the rounding of a; an A equal to BASE fails,
 * as there is no update to compare). Elementwise ratios are
 * not a fair test here: Adam divides each gradient by its own running RMS, so
 * a weight whose gradient is ~0 moves by lr x (sign noise) whatever its size,
 * and float summation-order differences between layouts show up there as
 * large ratios on tiny weights. The largest elementwise ratio is printed for
 * information. Exits 1 when the difference exceeds max_rel or the sizes differ. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *load(const char *path, size_t *count)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cmp_weights: cannot open %s\n", path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *p = malloc((size_t)n + 4);
    if (!p || fread(p, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cmp_weights: cannot read %s\n", path);
        exit(2);
    }
    fclose(f);
    *count = (size_t)n / sizeof(float);
    return p;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: cmp_weights A B [max_rel [BASE]]\n");
        return 2;
    }
    double tol = argc > 3 ? atof(argv[3]) : 0;
    size_t na, nb, nbase = 0;
    float *a = load(argv[1], &na), *b = load(argv[2], &nb);
    float *base = argc > 4 ? load(argv[4], &nbase) : NULL;
    if (na != nb || na == 0 || (base && nbase != na)) {
        fprintf(stderr, "cmp_weights: %s has %zu floats, %s has %zu%s%s%s\n", argv[1], na, argv[2],
                nb, base ? ", the base " : "", base ? argv[4] : "", base ? " another count" : "");
        return 1;
    }
    double maxd = 0, maxa = 0, elem = 0;
    size_t at = 0;
    for (size_t i = 0; i < na; i++) {
        /* float - float is exact in double (the exponents of weights differ by far less
         * than the 29 extra bits), so the update a - base carries only a's own rounding */
        double o = base ? base[i] : 0.0, ua = (double)a[i] - o, ub = (double)b[i] - o;
        double d = fabs(ua - ub);
        if (!(d <= maxd)) { /* NaN counts as the worst */
            maxd = d;
            at = i;
        }
        maxa = fmax(maxa, fabs(ua));
        double s = fmax(fabs(ua), fabs(ub));
        if (s > 0)
            elem = fmax(elem, d / s);
    }
    double worst = maxa > 0 ? maxd / maxa : maxd;
    if (maxd != maxd)
        worst = INFINITY;
    int same = memcmp(a, b, na * sizeof(float)) == 0;
    printf("%s vs %s%s%s: %zu floats, %s, relative difference %.3g (max |a-b| %.3g at [%zu], "
           "max |a%s| %.3g; largest elementwise ratio %.3g)\n",
           argv[1], argv[2], base ? ", updates from " : "", base ? argv[4] : "", na,
           same ? "bitwise equal" : "not bitwise equal", worst, maxd, at, base ? "-base" : "", maxa,
           elem);
    free(a), free(b), free(base);
    if (base && maxa == 0) { /* nothing moved: a comparison of updates would pass vacuously */
        printf("cmp_weights: %s equals the base %s: no update to compare\n", argv[1], argv[4]);
        return 1;
    }
    if (tol == 0)
        return same ? 0 : 1;
    return worst <= tol ? 0 : 1;
}
