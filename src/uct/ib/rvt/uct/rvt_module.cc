/*
 * Where UCX meets the module: the rvt component and its one transport,
 * and their registration. The only file that knows how a UCX version
 * loads modules.
 *
 * UCX 1.13 loads only the modules compiled into its list, so this one is
 * brought in with LD_PRELOAD (or dlopen before UCX looks for components),
 * and registers itself from a constructor; uct_query_components() then
 * lists it, and its UCX_RVT_* settings are in `ucx_info -c`. A UCX with a
 * plugin entry point (1.22's UCX_PLUGIN_PATH) would get its entry here,
 * next to the constructor, and nothing else would change.
 */
#include "uct/ib/rvt/uct/component.h"
#include "uct/ib/rvt/uct/iface.h"
#include "uct/ib/rvt/uct/md.h"
#include "uct/ib/rvt/uct/ucx.h"

using rvt::uct::unsupported;

extern "C" {

uct_component_t uct_rvt_component = {
        .name               = "rvt",
        .query_md_resources = rvt::uct::query_md_resources,
        .md_open            = rvt::uct::md_open,
        .cm_open            = unsupported<uct_component_cm_open_func_t>,
        .rkey_unpack        = rvt::uct::rkey_unpack,
        .rkey_ptr           = unsupported<uct_component_rkey_ptr_func_t>,
        .rkey_release       = rvt::uct::rkey_release,
        .md_config =
                {
                        .name   = "rvt memory domain",
                        .prefix = "RVT_",
                        .table  = rvt::uct::md_config_table,
                        .size   = sizeof(rvt::uct::md_config),
                        .list   = {},
                },
        /* no connection manager */
        .cm_config =
                {
                        .name   = "",
                        .prefix = "",
                        .table  = nullptr,
                        .size   = 0,
                        .list   = {},
                },
        .tl_list     = UCT_COMPONENT_TL_LIST_INITIALIZER(&uct_rvt_component),
        .list        = {},
        .flags       = 0,
        .md_vfs_init = rvt::uct::md_vfs_init,
};

uct_tl_t uct_rvt_tl = {
        .name          = "rvt",
        .query_devices = rvt::uct::query_tl_devices,
        .iface_open    = rvt::uct::iface_open,
        .config =
                {
                        .name   = "rvt transport",
                        .prefix = "RVT_",
                        .table  = rvt::uct::iface_config_table,
                        .size   = sizeof(rvt::uct::iface_config),
                        .list   = {},
                },
        .list = {},
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
