# SPDX-License-Identifier: BSD-3-Clause
# rvt_modulefile.m4: where the modulefile ucx-rvt goes
# (contrib/modulefiles/ucx-rvt.in: Environment Modules and Lmod read its
# Tcl), installed for a UCX that loads only its own modules (1.13).
#
# RVT_CHECK_MODULEFILE
#   --with-modulefiledir=DIR (default DATADIR/modules/modulefiles, on
#   MODULEPATH of Debian's Environment Modules; Lmod sites `module use`
#   it).
#
#   AC_SUBSTs: modulefiledir

AC_DEFUN([RVT_CHECK_MODULEFILE], [
AC_ARG_WITH([modulefiledir],
    [AS_HELP_STRING([--with-modulefiledir=DIR],
        [where the modulefile ucx-rvt goes (default:
         DATADIR/modules/modulefiles)])],
    [modulefiledir=$withval], [modulefiledir='${datadir}/modules/modulefiles'])
AC_SUBST([modulefiledir])
])
