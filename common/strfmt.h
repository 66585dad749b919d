/* Safe quoting of user text inside error messages: control bytes escaped,
 * long text cut with "...", so a message stays one readable line whatever
 * the input (the TF_CONFIG and Keras model readers use it); and the last line
 * of defence, the control bytes of every whole message escaped. */
#ifndef MW_COMMON_STRFMT_H
#define MW_COMMON_STRFMT_H

#include <stddef.h>

/* Copy s into buf (nbytes) with \n, \t and \xNN for other control bytes (and
 * \" \\ when quotes is set), cut after max source bytes with "...". Bytes >=
 * 0x80 pass through when quotes is set (UTF-8 user text stays readable) and
 * are escaped otherwise (parser messages may quote undecodable bytes). The C1
 * controls' UTF-8 (0xc2 0x80..0x9f) are escaped either way. */
void mw_str_escape(char *buf, size_t nbytes, const char *s, size_t max, int quotes);
/* s into buf with its control bytes escaped as above and nothing else: every message is stored
 * (mw_err) and logged (mw_log) through it, so no message can carry a raw control byte to a
 * terminal (an ESC ] 0 ; ... BEL in a CSV field would set its title), whatever it quotes. */
void mw_str_controls(char *buf, size_t nbytes, const char *s);
/* "s" in double quotes, escaped as above and cut after max source bytes;
 * returns buf. nbytes >= 4 * max + 8 never cuts early. */
const char *mw_str_quote(char *buf, size_t nbytes, const char *s, size_t max);

#endif
