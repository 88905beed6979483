/* The text a picture draws: labels made safe for cairo (which refuses
 * invalid UTF-8 and would fail the whole picture), numbers of the scale
 * bar, and their ticks. */
#include "viz_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The length of the valid UTF-8 sequence at s (1 to 4), or 0 when the
 * bytes there are not one (overlong forms, surrogates and values past
 * U+10FFFF included). */
static int utf8_length(const unsigned char *s)
{
    unsigned c = s[0];
    int n = c < 0x80             ? 1
            : (c & 0xE0) == 0xC0 ? 2
            : (c & 0xF0) == 0xE0 ? 3
            : (c & 0xF8) == 0xF0 ? 4
                                 : 0;
    if (n <= 1)
        return n;
    uint32_t cp = c & (0x7Fu >> n);
    for (int k = 1; k < n; k++) {
        if ((s[k] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[k] & 0x3Fu);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

void viz_text_clean(const char *text, size_t max_chars, char *out, size_t size)
{
    static const char ellipsis[] = "\xE2\x80\xA6"; /* U+2026 */
    size_t o = 0, chars = 0;
    const unsigned char *s = (const unsigned char *)(text ? text : "");
    if (!size)
        return;
    while (*s) {
        int n = utf8_length(s);
        bool control = n == 1 && (*s < 0x20 || *s == 0x7F);
        if (chars == max_chars || o + (n > 0 ? (size_t)n : 1) + sizeof ellipsis > size) {
            memcpy(out + o, ellipsis, sizeof ellipsis); /* with its terminator */
            return;
        }
        if (n == 0 || control) {
            out[o++] = '?';
            s += n == 0 ? 1 : n;
        } else {
            memcpy(out + o, s, (size_t)n);
            o += (size_t)n;
            s += n;
        }
        chars++;
    }
    out[o] = '\0';
}

void viz_text_label(const char *const *tokens, uint32_t cell, uint32_t block, char *out,
                    size_t size)
{
    uint32_t first = cell * block;
    if (!tokens) {
        snprintf(out, size, "%u", first);
        return;
    }
    /* 14 characters keep a column of labels narrower than a tile */
    viz_text_clean(tokens[first], 14, out, size);
    if (block > 1 && strlen(out) + 2 <= size)
        strcat(out, "+");
}

int viz_text_ticks(double top, double *ticks, int cap)
{
    if (!(top > 0) || cap < 1)
        return 0;
    /* the largest step of 1, 2 or 5 times a power of ten giving 4+ ticks
     * (top / step >= 3) */
    double step = pow(10, ceil(log10(top)));
    static const double down[3] = {0.5, 0.4, 0.5}; /* 10 -> 5 -> 2 -> 1 */
    for (int k = 0; top / step < 3.0; k = (k + 1) % 3)
        step *= down[k];
    int n = 0;
    /* a hair over top: 0.3 / 0.1 must give 0.3 */
    for (double v = 0; v <= top * (1 + 1e-9) && n < cap; v = step * ++n)
        ticks[n] = v;
    return n;
}

void viz_text_number(double v, char *out, size_t size) { snprintf(out, size, "%.3g", v); }

double viz_text_width(cairo_t *cr, const char *text)
{
    cairo_text_extents_t e;
    cairo_text_extents(cr, text, &e);
    return e.x_advance;
}
