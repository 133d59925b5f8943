# SPDX-License-Identifier: BSD-3-Clause
# rvt_mpi.m4: Open MPI's compiler wrappers, for the MPI and OpenSHMEM test
# programs (test/mpi, test/shmem; run by test/testbed/mpi.sh).
#
# RVT_CHECK_MPI
#   Finds mpicxx and oshcxx (MPICXX, OSHCXX override; --without-mpi skips
#   both). The programs compile with our C++ compiler and warnings, the
#   include flags the wrapper reports (--showme:compile, as -isystem so that
#   MPI's headers are not held to our warnings), and link with the wrapper
#   itself; a link test decides. Not required: without them the programs
#   are not built, and test/testbed/mpi.sh fails, saying why.
#
#   AC_SUBSTs: MPICXX, MPI_CPPFLAGS, OSHCXX, SHMEM_CPPFLAGS
#   AM_CONDITIONALs: HAVE_MPI, HAVE_SHMEM

# RVT_MPI_WRAPPER(VAR, NAMES, HEADER, BODY, CPPFLAGS-VAR, HAVE-VAR)
AC_DEFUN([RVT_MPI_WRAPPER], [
AC_PATH_PROGS([$1], [$2], [no])
$6=no
AS_IF([test "x$$1" != xno], [
    $5=`$$1 --showme:compile 2>/dev/null | sed 's/\(^\| \)-I/\1-isystem /g'`
    AC_LANG_PUSH([C++])
    rvt_save_CXX=$CXX
    rvt_save_CPPFLAGS=$CPPFLAGS
    # the wrapper drives our compiler, with the C++20 flag that
    # AX_CXX_COMPILE_STDCXX appended to CXX
    CXX="$$1 `echo "$CXX" | sed 's/^[[^ ]]*//'`"
    CPPFLAGS="$$5 -DOMPI_SKIP_MPICXX=1 $CPPFLAGS"
    AC_MSG_CHECKING([whether $$1 builds a C++20 program with $3])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <$3>
#include <span>]], [$4])], [$6=yes])
    AC_MSG_RESULT([$$6])
    CXX=$rvt_save_CXX
    CPPFLAGS=$rvt_save_CPPFLAGS
    AC_LANG_POP([C++])])
AC_SUBST([$1])
AC_SUBST([$5])
])

AC_DEFUN([RVT_CHECK_MPI], [
AC_REQUIRE([RVT_CHECK_COMPILER])
AC_ARG_WITH([mpi],
    [AS_HELP_STRING([--without-mpi],
        [do not build the MPI and OpenSHMEM test programs (default: build
         them when mpicxx and oshcxx work)])],
    [], [with_mpi=check])
AC_ARG_VAR([MPICXX], [MPI C++ compiler wrapper (default: mpicxx)])
AC_ARG_VAR([OSHCXX], [OpenSHMEM C++ compiler wrapper (default: oshcxx)])
have_mpi=no
have_shmem=no
AS_IF([test "x$with_mpi" != xno], [
    RVT_MPI_WRAPPER([MPICXX], [mpicxx mpic++], [mpi.h],
        [[return MPI_Init(nullptr, nullptr);]], [MPI_CPPFLAGS], [have_mpi])
    RVT_MPI_WRAPPER([OSHCXX], [oshcxx oshc++], [shmem.h],
        [[shmem_init(); return shmem_my_pe();]], [SHMEM_CPPFLAGS],
        [have_shmem])])
AM_CONDITIONAL([HAVE_MPI], [test $have_mpi = yes])
AM_CONDITIONAL([HAVE_SHMEM], [test $have_shmem = yes])
])
