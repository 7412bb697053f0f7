/* pmath.c - exp, log, cos and tanh from IEEE + - * / only, so the RNG's
 * normals and the model's softmax, GELU, SiLU and timestep embedding give
 * the same bits on every IEEE-754 machine (libm results differ between
 * implementations in the last bit). Each is accurate to a few double
 * ulps; callers round the result to fp32. floor, frexp and ldexp are
 * exact operations.
 */
#include <math.h>

#include "kernels_internal.h"

/* ln 2 split so that k * LN2_HI is exact for |k| < 2^11 (fdlibm). */
static const double LN2_HI = 6.93147180369123816490e-01;
static const double LN2_LO = 1.90821492927058770002e-10;
static const double LOG2E = 1.44269504088896338700e+00;
static const double TWO_PI = 6.28318530717958647693e+00;

/* e^x: x = k ln2 + r with |r| <= ln2/2, then Taylor to degree 13
 * (truncation below 1e-17 relative). */
double ppvk_exp(double x) {
    if (x != x) return x;
    if (x > 709.78) return INFINITY;
    if (x < -745.2) return 0.0;
    double kf = floor(x * LOG2E + 0.5);
    double r = (x - kf * LN2_HI) - kf * LN2_LO;
    double p = 1.0;
    for (int n = 13; n >= 1; n--)
        p = 1.0 + p * r / n; /* Horner on 1 + r(1 + r/2(1 + r/3 ...)) */
    return ldexp(p, (int)kf);
}

/* ln x for x > 0: x = 2^e m with m in [sqrt(1/2), sqrt(2)), then
 * ln m = 2 atanh(f), f = (m-1)/(m+1), |f| < 0.172, series to f^23. */
double ppvk_log(double x) {
    if (x != x || x < 0.0) return NAN;
    if (x == 0.0) return -INFINITY;
    if (x == INFINITY) return x;
    int e;
    double m = frexp(x, &e);
    if (m < 0.70710678118654752440) {
        m *= 2.0;
        e -= 1;
    }
    double f = (m - 1.0) / (m + 1.0), f2 = f * f, s = 0.0;
    for (int i = 23; i >= 1; i -= 2)
        s = s * f2 + 1.0 / i;
    return e * LN2_HI + (e * LN2_LO + 2.0 * f * s);
}

/* Taylor series of cos and sin on |x| <= pi/4 (truncation below 1e-20). */
static double cos_poly(double x) {
    double x2 = x * x, p = 1.0;
    for (int n = 20; n >= 2; n -= 2)
        p = 1.0 - p * x2 / (n * (n - 1));
    return p;
}

static double sin_poly(double x) {
    double x2 = x * x, p = 1.0;
    for (int n = 21; n >= 3; n -= 2)
        p = 1.0 - p * x2 / (n * (n - 1));
    return x * p;
}

/* cos(2 pi u), reduced exactly in turns: the fractional part and the
 * reflections below are exact in IEEE arithmetic. */
double ppvk_cos_turns(double u) {
    double t = u - floor(u);  /* [0, 1) */
    if (t > 0.5) t = 1.0 - t; /* cos is even: [0, 0.5] */
    double sign = 1.0;
    if (t > 0.25) {
        t = 0.5 - t; /* cos(pi - a) = -cos a: [0, 0.25] */
        sign = -1.0;
    }
    if (t > 0.125) return sign * sin_poly(TWO_PI * (0.25 - t));
    return sign * cos_poly(TWO_PI * t);
}

/* tanh x: an odd series near 0 (where 1 - 2/(e^2x + 1) cancels), the
 * exp form elsewhere, and +-1 past |x| = 22. */
double ppvk_tanh(double x) {
    double a = fabs(x), r;
    if (a < 0.0625) {
        double a2 = a * a;
        r = a *
            (1.0 + a2 * (-1.0 / 3 +
                         a2 * (2.0 / 15 +
                               a2 * (-17.0 / 315 + a2 * (62.0 / 2835 + a2 * (-1382.0 / 155925))))));
    } else if (a < 22.0) {
        double e = ppvk_exp(2.0 * a);
        r = (e - 1.0) / (e + 1.0);
    } else {
        r = 1.0;
    }
    return x < 0 ? -r : r;
}
