/* Escaping and quoting for messages; see strfmt.h. */
#include "common/strfmt.h"

#include <stdio.h>
#include <string.h>

void mw_str_escape(char *buf, size_t n, const char *s, size_t max, int quotes)
{
    size_t o = 0, i = 0;
    if (n == 0)
        return;
    for (; s[i] && i < max && o + 5 < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (quotes && (ch == '"' || ch == '\\')) {
            buf[o++] = '\\';
            buf[o++] = (char)ch;
        } else if (ch == '\n' || ch == '\t') {
            buf[o++] = '\\';
            buf[o++] = ch == '\n' ? 'n' : 't';
        } else if (ch < 0x20 || ch == 0x7f || (!quotes && ch >= 0x80)) {
            o += (size_t)snprintf(buf + o, n - o, "\\x%02x", ch);
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
