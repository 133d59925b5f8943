/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX's internal headers as the module's C++ sees them, and the few helpers
 * every file of the module needs at the C boundary.
 *
 * The headers are C: they come in here, inside extern "C", and nowhere
 * else. They arrive through -isystem (config/m4/rvt_ucx.m4), which keeps
 * their own warnings out of -Werror; UCX's config.h is forced in by
 * UCX_INTERNAL_CPPFLAGS, so this module never includes rvt_config.h.
 *
 * UCX macros that expand to GNU statement expressions or `typeof`
 * (ucs_derived_of, UCS_CLASS_*, UCT_CHECK_*) are not used from C++: the
 * to_xxx() helpers of each file downcast instead, and the UCS class
 * constructors are called as plain functions (base.h).
 */
#ifndef RVT_UCT_UCX_H
#define RVT_UCT_UCX_H

extern "C" {
#include <ucs/config/parser.h>
#include <ucs/debug/log.h>
#include <ucs/memory/rcache.h>
#include <ucs/sys/sys.h>
#include <ucs/sys/compiler_def.h>
#include <ucs/sys/string.h> /* UCS_MEMUNITS_INF, _AUTO */
#include <ucs/time/time.h>
#include <ucs/type/class.h>
#include <uct/api/uct.h>
#include <uct/base/uct_component.h>
#include <uct/base/uct_iface.h>
#include <uct/base/uct_md.h>
}

#include <cstdint>
#include <type_traits>

namespace rvt::uct {

/*
 * A slot of a UCX ops table that rvt does not implement: a function of the
 * slot's exact type that answers "unsupported" in the slot's return type
 * (a status, an ssize_t status, or a status pointer). Preferred to casting
 * ucs_empty_function_return_unsupported, whose C type matches no slot.
 */
template<class Fn> struct unsupported_fn;

template<class R, class... Args> struct unsupported_fn<R (*)(Args...)> {
    static R call(Args...) noexcept
    {
        if constexpr (std::is_pointer_v<R>) {
            return reinterpret_cast<R>(
                    static_cast<intptr_t>(UCS_ERR_UNSUPPORTED));
        } else {
            return static_cast<R>(UCS_ERR_UNSUPPORTED);
        }
    }
};

template<class Fn> inline constexpr Fn unsupported = unsupported_fn<Fn>::call;

} // namespace rvt::uct

/* what differs between the UCX versions rvt builds against */
#include "uct/ib/rvt/uct/ucx_compat.h"

#endif
