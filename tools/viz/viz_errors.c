/* Result names and messages (from the X-macro in viz.h), the error buffer,
 * and the format a path names. */
#include "viz_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

const char *vkattn_viz_result_name(vkattn_viz_result r)
{
    switch (r) {
#define VIZ_NAME_(name, value, text) \
    case name:                       \
        return #name;
        VKATTN_VIZ_RESULTS(VIZ_NAME_)
#undef VIZ_NAME_
    }
    return "unknown result";
}

const char *vkattn_viz_result_message(vkattn_viz_result r)
{
    switch (r) {
#define VIZ_TEXT_(name, value, text) \
    case name:                       \
        return text;
        VKATTN_VIZ_RESULTS(VIZ_TEXT_)
#undef VIZ_TEXT_
    }
    return "unknown result";
}

vkattn_viz_result viz_fail(char *err, size_t err_size, vkattn_viz_result r, const char *fmt, ...)
{
    if (err && err_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_size, fmt, ap);
        va_end(ap);
    }
    return r;
}

vkattn_viz_result vkattn_viz_format_of(const char *path, vkattn_viz_format *out, char *err,
                                       size_t err_size)
{
    if (!path || !out)
        return viz_fail(err, err_size, VKATTN_VIZ_ERROR_ARGUMENT, "path is NULL");
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(slash ? slash + 1 : path, '.');
    if (dot && strcasecmp(dot, ".png") == 0) {
        *out = VKATTN_VIZ_FORMAT_PNG;
        return VKATTN_VIZ_SUCCESS;
    }
    if (dot && strcasecmp(dot, ".svg") == 0) {
        *out = VKATTN_VIZ_FORMAT_SVG;
        return VKATTN_VIZ_SUCCESS;
    }
    return viz_fail(err, err_size, VKATTN_VIZ_ERROR_FORMAT,
                    "path \"%s\": extension \"%s\" is not .png or .svg", path, dot ? dot : "");
}
