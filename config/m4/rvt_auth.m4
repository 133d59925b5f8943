# SPDX-License-Identifier: BSD-3-Clause
# rvt_auth.m4: what the agents' handshake credentials need
# (agent/peers/peer_auth.h).
#
# RVT_CHECK_AUTH
#   libmunge (MUNGE credentials) and OpenSSL's libcrypto (SHA-256 and
#   HMAC for the job secret), both required: the agent refuses strangers
#   with whichever the site has, so both are always built in.
#
#   AC_SUBSTs: AUTH_LIBS

AC_DEFUN([RVT_CHECK_AUTH], [
AC_CHECK_HEADERS([munge.h openssl/hmac.h openssl/evp.h], [],
    [AC_MSG_ERROR([header $ac_header not found; install libmunge-dev and libssl-dev (contrib/setup-deps.sh)])])
AC_CHECK_LIB([munge], [munge_encode], [AUTH_LIBS=-lmunge],
    [AC_MSG_ERROR([cannot link with libmunge (munge_encode); install libmunge-dev (contrib/setup-deps.sh)])])
AC_CHECK_LIB([crypto], [HMAC], [AUTH_LIBS="$AUTH_LIBS -lcrypto"],
    [AC_MSG_ERROR([cannot link with OpenSSL's libcrypto (HMAC); install libssl-dev (contrib/setup-deps.sh)])])
AC_SUBST([AUTH_LIBS])
])
