/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tests/lib/ctl-json.h"

#include <check.h>

#include "qmp/json-util.h"

json_object *ctl_show_sim(const DaemonFixture *d, unsigned index) {
        char name[32];
        sim_name(index, name, sizeof(name));
        CtlRun run = ctl_run(d, "--json", "show", name);
        json_object *doc = run.code == 0 ? json_tokener_parse(run.out) : NULL;
        int code = run.code;
        /* Kept for the message, freed before any assertion can leave by longjmp. */
        char out[512];
        snprintf(out, sizeof(out), "%s%s", run.out ? run.out : "", run.err ? run.err : "");
        ctl_run_done(&run);
        ck_assert_msg(code == 0, "rightsizectl --json show %s: %d %s", name, code, out);
        ck_assert_msg(doc, "rightsizectl --json show is not JSON: %s", out);
        return doc;
}

const char *ctl_json_str(json_object *o, const char *key) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
                return "";
        return json_object_get_string(v);
}

uint64_t ctl_json_u64(json_object *o, const char *key) {
        json_object *v;
        uint64_t u;
        if (!json_object_object_get_ex(o, key, &v) || json_value_get_u64(v, &u) < 0)
                return UINT64_MAX;
        return u;
}

bool ctl_json_true(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_boolean) &&
               json_object_get_boolean(v);
}
