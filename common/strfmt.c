/* Escaping and quoting for messages; see strfmt.h. */
#include "common/strfmt.h"

#include <stdio.h>
#include <string.h>

enum { ESC_QUOTES = 1, ESC_HIGH = 2 }; /* also \" and \\; also every byte >= 0x80 */

/* Whether s[i] starts a C1 control (U+0080..U+009F) in UTF-8: 0xc2 0x80..0x9f, which some
 * terminals obey as 8-bit controls (0x9b is CSI). */
static int c1_at(const char *s, size_t i)
{
    return (unsigned char)s[i] == 0xc2 && (unsigned char)s[i + 1] >= 0x80 &&
           (unsigned char)s[i + 1] <= 0x9f;
}

/* The one escaping loop: s into buf (n > 0 bytes), cut after max source bytes with "...". */
static void escape(char *buf, size_t n, const char *s, size_t max, unsigned how)
{
    size_t o = 0, i = 0;
    int c1 = 0; /* the second byte of a C1 control: escaped too */
    for (; s[i] && i < max && o + 5 < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        c1 = c1 || c1_at(s, i);
        if ((how & ESC_QUOTES) && (ch == '"' || ch == '\\')) {
            buf[o++] = '\\';
            buf[o++] = (char)ch;
        } else if (ch == '\n' || ch == '\t') {
            buf[o++] = '\\';
            buf[o++] = ch == '\n' ? 'n' : 't';
        } else if (ch < 0x20 || ch == 0x7f || ((how & ESC_HIGH) && ch >= 0x80) || c1) {
            o += (size_t)snprintf(buf + o, n - o, "\\x%02x", ch);
            c1 = ch == 0xc2 && c1; /* after its second byte, done */
        } else {
            buf[o++] = (char)ch;
        }
    }
    if (s[i] && o + 4 <= n) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o < n ? o : n - 1] = '\0';
}

void mw_str_escape(char *buf, size_t n, const char *s, size_t max, int quotes)
{
    if (n)
        escape(buf, n, s, max, quotes ? ESC_QUOTES : ESC_HIGH);
}

void mw_str_controls(char *buf, size_t n, const char *s)
{
    if (n)
        escape(buf, n, s, (size_t)-1, 0);
}

const char *mw_str_quote(char *buf, size_t n, const char *s, size_t max)
{
    if (n < 3) {
        if (n)
            buf[0] = '\0';
        return buf;
    }
    /* escape into the middle, then add the quotes around it */
    mw_str_escape(buf + 1, n - 2, s, max, 1);
    size_t len = strlen(buf + 1);
    buf[0] = '"';
    buf[len + 1] = '"';
    buf[len + 2] = '\0';
    return buf;
}
