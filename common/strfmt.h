/* Safe quoting of user text inside error messages: control bytes escaped,
 * long text cut with "...", so a message stays one readable line whatever
 * the input (the TF_CONFIG and Keras model readers use it). */
#ifndef MW_COMMON_STRFMT_H
#define MW_COMMON_STRFMT_H

#include <stddef.h>

/* Copy s into buf (nbytes) with \n, \t and \xNN for other control bytes (and
 * \" \\ when quotes is set), cut after max source bytes with "...". Bytes >=
 * 0x80 pass through when quotes is set (UTF-8 user text stays readable) and
 * are escaped otherwise (parser messages may quote undecodable bytes). */
void mw_str_escape(char *buf, size_t nbytes, const char *s, size_t max, int quotes);
/* "s" in double quotes, escaped as above and cut after max source bytes;
 * returns buf. nbytes >= 4 * max + 8 never cuts early. */
const char *mw_str_quote(char *buf, size_t nbytes, const char *s, size_t max);

#endif
