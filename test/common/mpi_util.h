/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the MPI programs (test/mpi) share beside the pattern: a failed MPI
 * call ends the job naming the call (their communicator returns errors
 * as codes, MPI_ERRORS_RETURN), counts as MPI's ints, a bad argument
 * refused by rank 0 naming the program, and the median of a run's times.
 * Header-only: each program is built by the MPI wrapper.
 */
#ifndef RVT_TEST_MPI_UTIL_H
#define RVT_TEST_MPI_UTIL_H

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace rvt::check {

inline int world_rank()
{
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

/* Aborts the job, naming `call` and MPI's words for rc, unless rc is
 * MPI_SUCCESS. */
inline void check_mpi(int rc, const char *call)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        std::fprintf(stderr, "FAIL: rank %d: %s: %s\n", world_rank(), call,
                     msg);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* Element counts for MPI; the programs' option limits keep them below
 * INT_MAX. */
inline int count_of(size_t n)
{
    return static_cast<int>(n);
}

[[noreturn]] inline void exit_parse(int code)
{
    MPI_Finalize();
    std::exit(code);
}

/* "PROGRAM: MSG (see --help)" from rank 0, and exit status 2. */
[[noreturn]] inline void
bad_argument(const char *program, const std::string &msg)
{
    if (world_rank() == 0) {
        std::fprintf(stderr, "%s: %s (see --help)\n", program, msg.c_str());
    }
    exit_parse(2);
}

/* The middle value (the upper of the two middle ones), 0 for none. */
inline double median(std::vector<double> v)
{
    if (v.empty()) {
        return 0;
    }
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

} // namespace rvt::check

#define MPI_CHECK(call) ::rvt::check::check_mpi((call), #call)

#endif
