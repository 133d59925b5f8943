# SPDX-License-Identifier: BSD-3-Clause
# rvt_rdmacore.m4: libibverbs (required) and mlx5dv (optional).
#
# RVT_CHECK_RDMACORE
#   The agent is plain libibverbs.  Registration on behalf of another process
#   talks to the kernel's uverbs ioctl ABI directly, and finds a device's
#   driver id over RDMA netlink, so the kernel uAPI headers are required too.
#   mlx5dv is only an optional fast path (--with-mlx5dv=yes|no|auto).
#
#   AC_SUBSTs: IBVERBS_LIBS, MLX5DV_LIBS
#   AM_CONDITIONAL: HAVE_MLX5DV;  define RVT_HAVE_MLX5DV (rvt_config.h)

AC_DEFUN([RVT_CHECK_RDMACORE], [
AC_CHECK_HEADERS([infiniband/verbs.h rdma/ib_user_ioctl_cmds.h \
                  rdma/ib_user_verbs.h rdma/rdma_netlink.h], [],
    [AC_MSG_ERROR([header $ac_header not found; install libibverbs-dev and linux-libc-dev (contrib/setup-deps.sh)])])
AC_CHECK_LIB([ibverbs], [ibv_open_device], [IBVERBS_LIBS=-libverbs],
    [AC_MSG_ERROR([cannot link with libibverbs (ibv_open_device); install libibverbs-dev (contrib/setup-deps.sh)])])

AC_ARG_WITH([mlx5dv],
    [AS_HELP_STRING([--with-mlx5dv=yes|no|auto],
        [use mlx5 direct verbs where the device is mlx5 (default: auto)])],
    [], [with_mlx5dv=auto])
have_mlx5dv=no
MLX5DV_LIBS=""
AS_IF([test "x$with_mlx5dv" != xno],
    [AC_CHECK_HEADER([infiniband/mlx5dv.h],
        [AC_CHECK_LIB([mlx5], [mlx5dv_query_device],
            [have_mlx5dv=yes; MLX5DV_LIBS=-lmlx5], [], [-libverbs])])
     AS_IF([test "x$with_mlx5dv" = xyes && test $have_mlx5dv = no],
        [AC_MSG_ERROR([--with-mlx5dv=yes but infiniband/mlx5dv.h or libmlx5 is missing; install libibverbs-dev])])])
AS_IF([test $have_mlx5dv = yes],
    [AC_DEFINE([RVT_HAVE_MLX5DV], [1], [Define to 1 if mlx5dv is usable.])])
AM_CONDITIONAL([HAVE_MLX5DV], [test $have_mlx5dv = yes])

AC_SUBST([IBVERBS_LIBS])
AC_SUBST([MLX5DV_LIBS])
])
