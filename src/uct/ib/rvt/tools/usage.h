/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A program's command line, written once: one table of options gives the
 * parser, `--help` and the manual page, so the three cannot drift.
 *
 *   program_doc + options[]  ---parse()----> setters called, or exit code
 *                            ---"--help"---> write_help() on stdout
 *                            ---"--man"----> write_man() on stdout (roff;
 *                                            the build runs it to make
 *                                            rvtd.8 and rvt-status.1)
 *
 * An option is --NAME=VALUE when it has a value name, else the flag
 * --NAME. `--man` is not listed in --help: it is the build's, not the
 * user's.
 */
#ifndef RVT_TOOLS_USAGE_H
#define RVT_TOOLS_USAGE_H

#include <cstdio>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace rvt::tools {

struct option {
    std::string name; /* without the dashes: "port" */
    std::string value; /* what the value is called ("N", "PATH"); empty
                          for a flag */
    std::string dflt; /* shown as "(default: ...)"; empty: none shown */
    std::string help; /* what it does, one phrase */
    /* Takes the value (empty for a flag); returns what is wrong with it
     * (a sentence naming the value and what was expected), empty if
     * nothing is. */
    std::function<std::string(std::string_view)> set;
};

/* What a manual page says besides the options. Paragraphs are separated
 * by a blank line ("\n\n"); text is plain, write_man() escapes it. */
struct program_doc {
    std::string name; /* "rvtd" */
    int section; /* 1 user command, 8 administration */
    std::string summary; /* the NAME line, after "name - " */
    std::string synopsis; /* the arguments after the name */
    std::string description; /* paragraphs */
    std::string exit_status; /* paragraphs */
    std::string see_also; /* "rvt-status(1)" */
};

enum class parsed {
    run, /* every option taken: go on */
    exit_ok, /* --help or --man printed: exit 0 */
    exit_bad, /* a bad argument, said on stderr: exit 2 */
};

/* Calls each option's setter in the order given. --help/-h prints
 * write_help() and --man write_man() on stdout. A bad argument (unknown,
 * a flag given a value, a value missing, or one its setter refuses) is
 * said on stderr as "<name>: <why> (see <name> --help)". */
parsed parse(int argc, char **argv, const program_doc &doc,
             std::span<const option> options);

/* parse() as a main() needs it: nullopt to go on, else the exit status
 * (0 after --help or --man, 2 after a bad argument). */
std::optional<int> parse_or_exit(int argc, char **argv, const program_doc &doc,
                                 std::span<const option> options);

void write_help(std::FILE *out, const program_doc &doc,
                std::span<const option> options);

/* The manual page in man(7) roff: NAME, SYNOPSIS, DESCRIPTION, OPTIONS
 * (each option of the table, then --help), EXIT STATUS, SEE ALSO. */
void write_man(std::FILE *out, const program_doc &doc,
               std::span<const option> options);

} // namespace rvt::tools

#endif
