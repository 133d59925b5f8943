/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * result<T>: a value or the reason there is none. Retriable and
 * input-dependent failures travel as values, not exceptions (STYLE.md 2):
 * the reason is a sentence naming the bad value and what was expected, ready
 * for a log line or a refusal message.
 */
#ifndef RVT_COMMON_RESULT_H
#define RVT_COMMON_RESULT_H

#include <string>
#include <utility>
#include <variant>

namespace rvt {

struct failure {
    std::string reason;
};

/* The value of a result that has nothing to return but success. */
struct done {};

template<class T> class result {
public:
    result(T value) : m_v(std::move(value))
    {
    }
    result(failure f) : m_v(std::move(f))
    {
    }

    bool ok() const noexcept
    {
        return m_v.index() == 0;
    }
    explicit operator bool() const noexcept
    {
        return ok();
    }

    const T &value() const &
    {
        return std::get<0>(m_v);
    }
    T &value() &
    {
        return std::get<0>(m_v);
    }
    T &&value() &&
    {
        return std::get<0>(std::move(m_v));
    }
    const std::string &error() const &
    {
        return std::get<1>(m_v).reason;
    }

private:
    std::variant<T, failure> m_v;
};

} // namespace rvt

#endif
