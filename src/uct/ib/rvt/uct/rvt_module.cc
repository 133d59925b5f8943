/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Where UCX meets the module: the rvt component and its one transport,
 * and their registration. The only file that knows how a UCX version
 * loads modules.
 *
 * The module registers itself from a constructor, however it is loaded;
 * uct_query_components() then lists it, and its UCX_RVT_* settings are in
 * `ucx_info -c`.
 *  - UCX 1.13 loads only the modules compiled into its list, so this one
 *    is brought in with LD_PRELOAD (or dlopen before UCX looks for
 *    components).
 *  - UCX 1.22 dlopens every lib<framework>_<name>.so.0 of its module
 *    directory and of the directories on UCX_PLUGIN_PATH when it first
 *    looks for UCT components (ucs_load_modules), which runs this
 *    constructor: nothing more is needed (its optional module entry,
 *    ucs_module_global_init, is for work that cannot run in a constructor;
 *    there is none). The file is named libuct_rvt.so.0 for that UCX
 *    (Makefile.am).
 * Differences of the tables' layouts are in ucx_compat.h.
 */
#include "uct/ib/rvt/uct/component.h"
#include "uct/ib/rvt/uct/iface.h"
#include "uct/ib/rvt/uct/md.h"
#include "uct/ib/rvt/uct/ucx.h"

using rvt::uct::unsupported;

extern "C" {

/* by hand: clang-format cannot lay out a macro that is a designator */
// clang-format off
uct_component_t uct_rvt_component = {
        .name               = "rvt",
        .query_md_resources = rvt::uct::query_md_resources,
        .md_open            = rvt::uct::md_open,
        .cm_open            = unsupported<uct_component_cm_open_func_t>,
        .rkey_unpack        = rvt::uct::rkey_unpack_slot<rvt::uct::rkey_unpack>,
        .rkey_ptr           = unsupported<uct_component_rkey_ptr_func_t>,
        .rkey_release       = rvt::uct::rkey_release,
        RVT_UCX_RKEY_COMPARE_SLOT /* where UCX has it (ucx_compat.h) */
        .md_config          = rvt::uct::config_entry(
                                      "rvt memory domain", "RVT_",
                                      rvt::uct::md_config_table,
                                      sizeof(rvt::uct::md_config)),
        /* no connection manager */
        .cm_config          = rvt::uct::config_entry("", "", nullptr, 0),
        .tl_list     = UCT_COMPONENT_TL_LIST_INITIALIZER(&uct_rvt_component),
        .list        = {},
        .flags       = 0,
        .md_vfs_init = rvt::uct::md_vfs_init,
};
// clang-format on

uct_tl_t uct_rvt_tl = {
        .name          = "rvt",
        .query_devices = rvt::uct::query_tl_devices,
        .iface_open    = rvt::uct::iface_open,
        .config        = rvt::uct::config_entry("rvt transport", "RVT_",
                                                rvt::uct::iface_config_table,
                                                sizeof(rvt::uct::iface_config)),
        .list          = {},
};

} // extern "C"

namespace {

[[gnu::constructor]] void uct_rvt_init()
{
    uct_component_register(&uct_rvt_component);
    uct_tl_register(&uct_rvt_component, &uct_rvt_tl);
}

[[gnu::destructor]] void uct_rvt_cleanup()
{
    uct_tl_unregister(&uct_rvt_tl);
    uct_component_unregister(&uct_rvt_component);
}

} // namespace
