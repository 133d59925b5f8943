# SPDX-License-Identifier: BSD-3-Clause
# rvt_ucx.m4: the installed UCX, and the UCX source tree it was built from.
#
# RVT_CHECK_UCX
#   A UCT transport built outside UCX's tree needs two things:
#   - the installed UCX (--with-ucx=PREFIX, default /usr): public headers,
#     libuct/libucs to link against, and the module directory to install in;
#   - UCX's internal headers (uct/base/uct_iface.h, ...), which distributions
#     do not install, from a source tree of the SAME version configured with
#     the SAME flags (--with-ucx-src=DIR, default: the tree that
#     contrib/setup-deps.sh prepares).  Struct layouts such as
#     uct_base_iface_t depend on both, and a mismatch is silent memory
#     corruption at run time, so every mismatch we can see stops configure.
#
#   AC_SUBSTs:
#     UCX_PREFIX, UCX_VERSION        the installed UCX (X.Y.Z)
#     UCX_CPPFLAGS, UCX_LIBS         its public headers and libuct/libucs
#     ucxmoduledir                   its module directory (<libdir>/ucx)
#     UCX_SRC, UCX_SRC_VERSION       the source tree
#     UCX_INTERNAL_CPPFLAGS          internal headers + the tree's config.h
#
# Why UCX_INTERNAL_CPPFLAGS forces UCX's config.h in with -include: the
# internal headers change layout with its ENABLE_* / HAVE_* macros but do
# not all include config.h themselves.  That config.h also defines PACKAGE,
# VERSION and PACKAGE_*, so rvt's own config header is named rvt_config.h
# and must never be included in a translation unit that uses
# UCX_INTERNAL_CPPFLAGS; and no file named config.h may exist in rvt's tree
# (UCX headers `#include "config.h"` when HAVE_CONFIG_H is set).
#
# Why -isystem rather than -I: UCX's headers are not -Wpedantic clean
# (flexible array members, non-void pointers to %p).  -isystem silences
# warnings inside them, not in rvt's code.

# The internal headers a transport includes, as C++ sees them.  configure's
# test programs start with confdefs.h, whose PACKAGE_* (rvt's) would clash
# with UCX's config.h if it were forced in first with -include, as the real
# build does; so here config.h comes after them, replacing them.
# $1 is a double quote; AC_COMPUTE_INT passes its prologue through a
# double-quoted shell string, where it must be ${rvt_dq} (set to ").
m4_define([_RVT_UCX_INTERNAL_PROLOGUE], [[
#undef PACKAGE_BUGREPORT
#undef PACKAGE_NAME
#undef PACKAGE_STRING
#undef PACKAGE_TARNAME
#undef PACKAGE_URL
#undef PACKAGE_VERSION
#include <config.h>
extern $1C$1 {
#include <uct/base/uct_iface.h>
#include <uct/base/uct_md.h>
#include <uct/base/uct_component.h>
#include <uct/api/v2/uct_v2.h>
#include <ucs/memory/rcache.h>
#include <ucs/time/time.h>
#include <ucs/sys/compiler_def.h>
}
]])

# _RVT_UCX_FEATURE(MACRO, WHAT, BODY)
#   Compiles BODY (C++ statements; <type_traits> is included) against the
#   internal headers and adds -DMACRO=1 to UCX_FEATURE_CPPFLAGS if it
#   compiles, -DMACRO=0 if not: src/uct/ib/rvt/uct/ucx_compat.h reads them.
#   "checking whether UCX WHAT".
m4_define([_RVT_UCX_FEATURE], [
AC_MSG_CHECKING([whether UCX $2])
AC_COMPILE_IFELSE([AC_LANG_PROGRAM([_RVT_UCX_INTERNAL_PROLOGUE(["])
#include <type_traits>], [$3])],
    [AC_MSG_RESULT([yes]); UCX_FEATURE_CPPFLAGS="$UCX_FEATURE_CPPFLAGS -D$1=1"],
    [AC_MSG_RESULT([no]); UCX_FEATURE_CPPFLAGS="$UCX_FEATURE_CPPFLAGS -D$1=0"])
])

# _RVT_UCX_MEMBER(MACRO, TYPE, MEMBER): whether TYPE has MEMBER.
m4_define([_RVT_UCX_MEMBER],
    [_RVT_UCX_FEATURE([$1], [$2 has $3], [[(void)&$2::$3;]])])

# _RVT_UCX_SIGNATURE(MACRO, WHAT, FUNC_TYPE, FUNCTION POINTER TYPE)
m4_define([_RVT_UCX_SIGNATURE],
    [_RVT_UCX_FEATURE([$1], [$2],
        [[static_assert(std::is_same_v<$3, $4>);]])])

# The UCX releases rvt supports: from the oldest to the newest minor
# release it is built and tested against (docs/operations.md, "Supported
# UCX releases", names each). rvt reaches into UCX's internal headers,
# which move between minor releases: one outside the range is refused.
m4_define([RVT_UCX_OLDEST], [1.13])
m4_define([RVT_UCX_NEWEST], [1.22])

AC_DEFUN([RVT_CHECK_UCX], [
AC_REQUIRE([AC_PROG_CC])
AC_REQUIRE([AC_PROG_CXX])

# ---- the installed UCX -------------------------------------------------
AC_ARG_WITH([ucx],
    [AS_HELP_STRING([--with-ucx=PREFIX],
        [installed UCX to build against (default: /usr)])],
    [], [with_ucx=/usr])
AS_CASE([$with_ucx],
    [yes|""], [with_ucx=/usr],
    [no], [AC_MSG_ERROR([rvt is a UCX transport: it cannot be built without UCX])])
UCX_PREFIX=$with_ucx

# /usr/include is searched anyway; naming it would reorder it. Another
# prefix's headers are system headers too (-isystem), as /usr's are: UCX's
# inline functions do not build under rvt's warnings (1.16's
# uct_invoke_completion passes a typed pointer to %p).
AS_IF([test "$UCX_PREFIX" = /usr], [UCX_CPPFLAGS=""],
    [UCX_CPPFLAGS="-isystem $UCX_PREFIX/include"])

# libuct's directory gives both the link path and the module directory.
AC_MSG_CHECKING([for the directory of libuct.so under $UCX_PREFIX])
rvt_multiarch=`$CC -print-multiarch 2>/dev/null`
ucx_libdir=""
for rvt_dir in ${rvt_multiarch:+"$UCX_PREFIX/lib/$rvt_multiarch"} \
               "$UCX_PREFIX/lib64" "$UCX_PREFIX/lib"; do
    AS_IF([test -e "$rvt_dir/libuct.so"], [ucx_libdir=$rvt_dir; break])
done
AS_IF([test -z "$ucx_libdir"],
    [AC_MSG_RESULT([not found])
     AC_MSG_ERROR([no libuct.so under $UCX_PREFIX/lib*; install libucx-dev (contrib/setup-deps.sh) or pass --with-ucx=PREFIX])])
AC_MSG_RESULT([$ucx_libdir])

# "major.minor.patch" from the UCT_VERNO_* defines of the public header.
# (@<:@ and @:>@ are autoconf's spelling of literal square brackets.)
AC_MSG_CHECKING([for the installed UCX version])
UCX_VERSION=`sed -n \
    -e 's/^#define UCT_VERNO_MAJOR  *\(@<:@0-9@:>@*\).*/\1./p' \
    -e 's/^#define UCT_VERNO_MINOR  *\(@<:@0-9@:>@*\).*/\1./p' \
    -e 's/^#define UCT_VERNO_PATCH  *\(@<:@0-9@:>@*\).*/\1/p' \
    "$UCX_PREFIX/include/uct/api/version.h" 2>/dev/null | tr -d '\n'`
AS_CASE([$UCX_VERSION],
    [@<:@0-9@:>@*.@<:@0-9@:>@*.@<:@0-9@:>@*], [],
    [AC_MSG_ERROR([cannot read UCT_VERNO_* from $UCX_PREFIX/include/uct/api/version.h])])
AC_MSG_RESULT([$UCX_VERSION])
rvt_ucx_minor=`echo "$UCX_VERSION" | cut -d. -f1,2`
AS_VERSION_COMPARE([$rvt_ucx_minor], [RVT_UCX_OLDEST],
    [rvt_ucx_supported=no], [rvt_ucx_supported=yes],
    [rvt_ucx_supported=yes])
AS_VERSION_COMPARE([$rvt_ucx_minor], [RVT_UCX_NEWEST], [], [],
    [rvt_ucx_supported=no])
AS_IF([test $rvt_ucx_supported = no],
    [AC_MSG_ERROR([UCX $UCX_VERSION ($UCX_PREFIX) is not supported: rvt supports UCX RVT_UCX_OLDEST to RVT_UCX_NEWEST (docs/operations.md, "Supported UCX releases"); pass --with-ucx=PREFIX of one])])
UCX_OLDEST=RVT_UCX_OLDEST
UCX_NEWEST=RVT_UCX_NEWEST

# Outside /usr, programs (the tests) must find this UCX's libraries, not
# another UCX's of the same soname (Debian's libuct.so.0) at run time.
AS_IF([test "$UCX_PREFIX" = /usr],
    [UCX_LIBS="-L$ucx_libdir -luct -lucs"],
    [UCX_LIBS="-L$ucx_libdir -Wl,-rpath,$ucx_libdir -luct -lucs"])
# UCP, for the integration tests that use it as a library user does
# (test_ucp_rvt.cc); the module itself never links it
UCP_LIBS="-L$ucx_libdir -lucp"

rvt_save_CPPFLAGS=$CPPFLAGS
rvt_save_LIBS=$LIBS
CPPFLAGS="$UCX_CPPFLAGS $CPPFLAGS"
AC_CHECK_HEADERS([uct/api/uct.h ucs/type/status.h], [],
    [AC_MSG_ERROR([UCX header $ac_header not found under $UCX_PREFIX/include; install libucx-dev (contrib/setup-deps.sh)])])
LIBS="$UCX_LIBS $LIBS"
AC_MSG_CHECKING([whether libuct and libucs link])
AC_LINK_IFELSE(
    [AC_LANG_PROGRAM([[#include <uct/api/uct.h>]],
        [[uct_component_h *c; unsigned n;
          return uct_query_components(&c, &n) != UCS_OK ||
                 ucs_status_string(UCS_OK) == 0;]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([cannot link with $UCX_LIBS; see config.log])])
CPPFLAGS=$rvt_save_CPPFLAGS
LIBS=$rvt_save_LIBS

AC_ARG_WITH([ucx-moduledir],
    [AS_HELP_STRING([--with-ucx-moduledir=DIR],
        [where to install the rvt UCX module (default: <UCX libdir>/ucx)])],
    [ucxmoduledir=$withval], [ucxmoduledir=$ucx_libdir/ucx])
AS_IF([test ! -d "$ucxmoduledir"],
    [AC_MSG_WARN([UCX module directory $ucxmoduledir does not exist])])

# ---- the matching UCX source tree --------------------------------------
# Default: where contrib/setup-deps.sh puts it (same rule, same variables).
# Debian's UCX (/usr): the tree of the libucx0 version; any other prefix:
# the tree `contrib/setup-deps.sh --ucx=VERSION` built it from.
rvt_cache=${RVT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rvt}
rvt_ucx_deb_ver=`dpkg-query -W -f='${Version}\n' libucx0 2>/dev/null | head -n 1`
AS_IF([test "$UCX_PREFIX" != /usr],
    [rvt_default_ucx_src="$rvt_cache/ucx-src-$UCX_VERSION"],
    [test -n "$rvt_ucx_deb_ver"],
    [rvt_default_ucx_src="$rvt_cache/ucx-src-$rvt_ucx_deb_ver"],
    [rvt_default_ucx_src=""])
AC_ARG_WITH([ucx-src],
    [AS_HELP_STRING([--with-ucx-src=DIR],
        [configured UCX source tree of the installed UCX's version, for its
         internal headers (required; default: the tree contrib/setup-deps.sh
         prepares, $RVT_CACHE/ucx-src-<libucx0 version> for /usr, else
         $RVT_CACHE/ucx-src-<UCX version>)])],
    [], [with_ucx_src=$rvt_default_ucx_src])
AS_CASE([$with_ucx_src],
    [no], [AC_MSG_ERROR([the UCX source tree is required (UCX does not install the internal headers a transport needs)])],
    [yes|""], [AS_IF([test -n "$rvt_default_ucx_src"],
                  [with_ucx_src=$rvt_default_ucx_src],
                  [AC_MSG_ERROR([no default UCX source tree (libucx0 is not a Debian package here); pass --with-ucx-src=DIR])])])

AC_MSG_CHECKING([for the UCX source tree])
AS_IF([test ! -d "$with_ucx_src"],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([UCX source tree $with_ucx_src does not exist; run contrib/setup-deps.sh or pass --with-ucx-src=DIR])])
UCX_SRC=`cd "$with_ucx_src" && pwd`
AS_IF([test ! -f "$UCX_SRC/configure.ac"],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([$UCX_SRC is not a UCX source tree (no configure.ac); run contrib/setup-deps.sh or pass --with-ucx-src=DIR])])
AS_IF([test ! -f "$UCX_SRC/config.h"],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([UCX source tree $UCX_SRC is not configured (no config.h); run contrib/setup-deps.sh, which configures it with the flags of the installed UCX])])
AC_MSG_RESULT([$UCX_SRC])

# The tree's version is what its configure.ac says:
#   d@&t@efine(\@<:@ucx_ver_major\@:>@, 1)  # Major version...
AC_MSG_CHECKING([for the UCX source tree version])
UCX_SRC_VERSION=`sed -n \
    -e 's/^d@&t@efine(\@<:@ucx_ver_major\@:>@, *\(@<:@0-9@:>@*\)).*/\1./p' \
    -e 's/^d@&t@efine(\@<:@ucx_ver_minor\@:>@, *\(@<:@0-9@:>@*\)).*/\1./p' \
    -e 's/^d@&t@efine(\@<:@ucx_ver_patch\@:>@, *\(@<:@0-9@:>@*\)).*/\1/p' \
    "$UCX_SRC/configure.ac" | tr -d '\n'`
AC_MSG_RESULT([${UCX_SRC_VERSION:-unknown}])
AS_IF([test "x$UCX_SRC_VERSION" != "x$UCX_VERSION"],
    [AC_MSG_ERROR([UCX source tree $UCX_SRC is version ${UCX_SRC_VERSION:-unknown} but the installed UCX ($UCX_PREFIX) is $UCX_VERSION; run contrib/setup-deps.sh or pass --with-ucx-src=DIR of version $UCX_VERSION])])

# The internal headers a transport includes, and one generated header.
for rvt_hdr in src/uct/base/uct_iface.h src/uct/base/uct_md.h \
               src/uct/base/uct_component.h src/ucs/sys/compiler_def.h \
               src/uct/api/version.h; do
    AS_IF([test ! -f "$UCX_SRC/$rvt_hdr"],
        [AC_MSG_ERROR([UCX source tree $UCX_SRC lacks $rvt_hdr; run contrib/setup-deps.sh or pass a complete, configured --with-ucx-src=DIR])])
done

UCX_INTERNAL_CPPFLAGS="-isystem $UCX_SRC/src -isystem $UCX_SRC -include $UCX_SRC/config.h"

# Prove the internal headers compile as C++20 with rvt's warning flags
# (and -Werror when enabled), and that their layout looks sane.
AC_LANG_PUSH([C++])
rvt_save_CPPFLAGS=$CPPFLAGS
rvt_save_CXXFLAGS=$CXXFLAGS
rvt_save_LIBS=$LIBS
CPPFLAGS="-isystem $UCX_SRC/src -isystem $UCX_SRC $UCX_CPPFLAGS $CPPFLAGS"
AC_MSG_CHECKING([whether UCX internal headers compile as C++20])
CXXFLAGS="$CXXFLAGS $RVT_CXXFLAGS"
AC_COMPILE_IFELSE([AC_LANG_PROGRAM([_RVT_UCX_INTERNAL_PROLOGUE(["])], [])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([UCX internal headers from $UCX_SRC do not compile with $CXX $CXXFLAGS $CPPFLAGS; see config.log])])
CXXFLAGS=$rvt_save_CXXFLAGS

# Not cached: a different tree must be measured again.  1.13.1: 1280.
AC_MSG_CHECKING([for sizeof(uct_base_iface_t)])
rvt_dq='"'
AC_COMPUTE_INT([rvt_base_iface_size], [sizeof(uct_base_iface_t)],
    [_RVT_UCX_INTERNAL_PROLOGUE([${rvt_dq}])], [rvt_base_iface_size=0])
AC_MSG_RESULT([$rvt_base_iface_size])
AS_IF([test "$rvt_base_iface_size" -lt 256 || test "$rvt_base_iface_size" -gt 65536],
    [AC_MSG_ERROR([sizeof(uct_base_iface_t) is $rvt_base_iface_size with $UCX_SRC/config.h; that is not a plausible UCX build])])

# The symbols a transport takes from libuct's internals must be exported.
AC_MSG_CHECKING([whether libuct exports the base iface class])
LIBS="$UCX_LIBS $LIBS"
AC_LINK_IFELSE(
    [AC_LANG_PROGRAM([_RVT_UCX_INTERNAL_PROLOGUE(["])],
        [[return &uct_base_iface_t_class == 0 ||
                 reinterpret_cast<void *>(&uct_base_iface_query) == 0;]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([cannot link UCX internal symbols (uct_base_iface_t_class) with $UCX_LIBS; see config.log])])

# What differs between UCX versions, probed rather than inferred from the
# version number (1.13.1, 1.16.0, 1.18.1 and 1.22.0 are built and tested).
UCX_FEATURE_CPPFLAGS=""
_RVT_UCX_FEATURE([RVT_UCX_MD_RCACHE_CONFIG],
    [has UCT's rcache config (uct_md_rcache_config_t)],
    [[uct_md_rcache_config_t c; uct_md_set_rcache_params(nullptr, &c);]])
_RVT_UCX_FEATURE([RVT_UCX_RCACHE_GET_ALIGNMENT],
    [ucs_rcache_get takes an alignment],
    [[static_assert(std::is_invocable_v<decltype(ucs_rcache_get),
          ucs_rcache_t *, void *, size_t, size_t, int, void *,
          ucs_rcache_region_t **>);]])
_RVT_UCX_MEMBER([RVT_UCX_RCACHE_OPS_MERGE], [ucs_rcache_ops_t], [merge])
_RVT_UCX_FEATURE([RVT_UCX_TIME_UNITS_TO_SEC],
    [has ucs_time_units_to_sec], [[(void)&ucs_time_units_to_sec;]])
_RVT_UCX_FEATURE([RVT_UCX_MD_BASE_MD_QUERY],
    [has uct_md_base_md_query], [[(void)&uct_md_base_md_query;]])
_RVT_UCX_FEATURE([RVT_UCX_IFACE_FILL_INFO_STR_BUF],
    [has uct_iface_fill_info_str_buf],
    [[(void)&uct_iface_fill_info_str_buf;]])
_RVT_UCX_SIGNATURE([RVT_UCX_MD_QUERY_V2], [MDs answer uct_md_attr_v2_t],
    [uct_md_query_func_t], [ucs_status_t (*)(uct_md_h, uct_md_attr_v2_t *)])
_RVT_UCX_SIGNATURE([RVT_UCX_MEM_REG_PARAMS], [mem_reg takes params],
    [uct_md_mem_reg_func_t],
    [ucs_status_t (*)(uct_md_h, void *, size_t,
                      const uct_md_mem_reg_params_t *, uct_mem_h *)])
_RVT_UCX_SIGNATURE([RVT_UCX_MKEY_PACK_ADDRESS],
    [mkey_pack takes the address and length],
    [uct_md_mkey_pack_func_t],
    [ucs_status_t (*)(uct_md_h, uct_mem_h, void *, size_t,
                      const uct_md_mkey_pack_params_t *, void *)])
_RVT_UCX_MEMBER([RVT_UCX_MD_OPS_IS_SOCKADDR_ACCESSIBLE], [uct_md_ops_t],
    [is_sockaddr_accessible])
_RVT_UCX_MEMBER([RVT_UCX_MD_OPS_MEM_ATTACH], [uct_md_ops_t], [mem_attach])
_RVT_UCX_MEMBER([RVT_UCX_MD_OPS_MEM_ELEM_PACK], [uct_md_ops_t],
    [mem_elem_pack])
_RVT_UCX_SIGNATURE([RVT_UCX_RKEY_UNPACK_PARAMS], [rkey_unpack takes params],
    [uct_component_rkey_unpack_func_t],
    [ucs_status_t (*)(uct_component_t *, const void *,
                      const uct_rkey_unpack_params_t *, uct_rkey_t *,
                      void **)])
_RVT_UCX_MEMBER([RVT_UCX_COMPONENT_RKEY_COMPARE], [uct_component_t],
    [rkey_compare])
_RVT_UCX_FEATURE([RVT_UCX_BASE_IFACE_INTERNAL_OPS],
    [has the base iface internal ops (uct_base_iface_internal_ops)],
    [[(void)&uct_base_iface_internal_ops;]])
_RVT_UCX_MEMBER([RVT_UCX_IFACE_OPS_QUERY_V2], [uct_iface_internal_ops_t],
    [iface_query_v2])
_RVT_UCX_MEMBER([RVT_UCX_PERF_ATTR_PATH_BANDWIDTH], [uct_perf_attr_t],
    [path_bandwidth])
_RVT_UCX_MEMBER([RVT_UCX_IFACE_OPS_CONNECT_TO_EP_V2],
    [uct_iface_internal_ops_t], [ep_connect_to_ep_v2])
_RVT_UCX_MEMBER([RVT_UCX_IFACE_OPS_IS_REACHABLE_V2],
    [uct_iface_internal_ops_t], [iface_is_reachable_v2])
_RVT_UCX_MEMBER([RVT_UCX_IFACE_OPS_EP_IS_CONNECTED],
    [uct_iface_internal_ops_t], [ep_is_connected])
_RVT_UCX_MEMBER([RVT_UCX_IFACE_OPS_GET_DEVICE_EP],
    [uct_iface_internal_ops_t], [ep_get_device_ep])
_RVT_UCX_MEMBER([RVT_UCX_IFACE_OPS_PUT_SGL_ZCOPY],
    [uct_iface_internal_ops_t], [ep_put_sgl_zcopy])
_RVT_UCX_FEATURE([RVT_UCX_IFACE_FLAG_INTER_NODE],
    [marks inter-node transports (UCT_IFACE_FLAG_INTER_NODE)],
    [[static_assert(UCT_IFACE_FLAG_INTER_NODE != 0);]])
UCX_INTERNAL_CPPFLAGS="$UCX_INTERNAL_CPPFLAGS$UCX_FEATURE_CPPFLAGS"

# Whether UCX loads external modules by itself (1.22: every
# lib<framework>_<name><ext> in UCX_PLUGIN_PATH and in its module
# directory, <ext> being what follows the first dot of libucs's file
# name, ".so.0"); else the module comes in with LD_PRELOAD (1.13).
AC_MSG_CHECKING([whether UCX loads plugins (UCX_PLUGIN_PATH)])
AC_COMPILE_IFELSE([AC_LANG_PROGRAM([_RVT_UCX_INTERNAL_PROLOGUE(["])
extern "C" {
#include <ucs/config/global_opts.h>
}], [[(void)&ucs_global_opts_t::plugin_path;]])],
    [ucx_loads_plugins=yes], [ucx_loads_plugins=no])
AC_MSG_RESULT([$ucx_loads_plugins])
AS_IF([test $ucx_loads_plugins = yes && test ! -e "$ucx_libdir/libucs.so.0"],
    [AC_MSG_ERROR([UCX loads plugins named after libucs's suffix, but $ucx_libdir has no libucs.so.0; rvt's module would be named libuct_rvt.so.0 and not be found])])

CPPFLAGS=$rvt_save_CPPFLAGS
LIBS=$rvt_save_LIBS
AC_LANG_POP([C++])

AM_CONDITIONAL([UCX_LOADS_PLUGINS], [test $ucx_loads_plugins = yes])
UCX_LOADS_PLUGINS=$ucx_loads_plugins
AC_SUBST([UCX_LOADS_PLUGINS])
AC_SUBST([UCX_PREFIX])
AC_SUBST([UCX_VERSION])
AC_SUBST([UCX_OLDEST])
AC_SUBST([UCX_NEWEST])
AC_SUBST([UCX_CPPFLAGS])
AC_SUBST([UCX_LIBS])
AC_SUBST([UCP_LIBS])
AC_SUBST([ucxmoduledir])
AC_SUBST([UCX_SRC])
AC_SUBST([UCX_SRC_VERSION])
AC_SUBST([UCX_INTERNAL_CPPFLAGS])
])
