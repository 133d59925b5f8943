/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What UCX logs at warning level or worse, collected for a test instead
 * of printed (the module's errors and warnings are part of what it does).
 */
#ifndef RVT_TEST_UCS_LOG_CAPTURE_H
#define RVT_TEST_UCS_LOG_CAPTURE_H

#include <ucs/debug/log_def.h>

#include <cstdarg>
#include <cstdio>
#include <string>
#include <vector>

namespace rvt::test {

/* Collects what UCX logs at warning level or worse while it lives
 * (UCX's own gtest fails any test that logs an error). One at a time. */
class log_capture {
public:
    log_capture()
    {
        s_lines = &m_lines;
        ucs_log_push_handler(handler);
    }
    ~log_capture()
    {
        ucs_log_pop_handler();
        s_lines = nullptr;
    }
    log_capture(const log_capture &)            = delete;
    log_capture &operator=(const log_capture &) = delete;

    const std::vector<std::string> &lines() const
    {
        return m_lines;
    }
    bool any_containing(const std::string &text) const
    {
        for (const auto &l : m_lines) {
            if (l.find(text) != std::string::npos) {
                return true;
            }
        }
        return false;
    }

private:
    static ucs_log_func_rc_t
    handler(const char *, unsigned, const char *, ucs_log_level_t level,
            const ucs_log_component_config_t *, const char *message, va_list ap)
    {
        if (level > UCS_LOG_LEVEL_WARN || s_lines == nullptr) {
            return UCS_LOG_FUNC_RC_CONTINUE;
        }
        /* whole, however long: the module quotes rvtd's reasons */
        va_list copy;
        va_copy(copy, ap);
        const int n = std::vsnprintf(nullptr, 0, message, copy);
        va_end(copy);
        std::string text(n > 0 ? static_cast<size_t>(n) : 0, '\0');
        va_copy(copy, ap);
        std::vsnprintf(text.data(), text.size() + 1, message, copy);
        va_end(copy);
        s_lines->push_back(std::move(text));
        return UCS_LOG_FUNC_RC_STOP; /* collected, not printed */
    }

    inline static std::vector<std::string> *s_lines = nullptr;
    std::vector<std::string> m_lines;
};

} // namespace rvt::test

#endif
