#!/usr/bin/env python3
"""A stand-in `gh` for the workflow tests: the few GitHub API calls the grader's verbs make,
answered from a JSON state file ($FAKE_GH_STATE) that also records every comment posted.

    gh api [--paginate] [-X GET] repos/R/pulls -f state=open [-f head=OWNER:BRANCH] --jq Q
    gh api repos/R/pulls/N --jq .head.sha        (or the sweep's [.mergeable, owner, updated_at])
    gh api --paginate repos/R/issues/N/comments --jq Q
    gh api -X POST repos/R/issues/N/comments --input -       (body on stdin)
    gh api -X PATCH repos/R/issues/comments/ID --input -
    gh api --paginate -X GET repos/R/actions/workflows/W/runs -f created=>=T [-f actor=L] ...
    gh api --paginate -X GET repos/R/actions/runs/ID/jobs -f filter=all ...
    gh api -X POST repos/R/actions/runs/ID/rerun

The --jq programs are not run: each endpoint prints what the grader's own query asks for. The
Actions endpoints (the grading cap's record) print GitHub's JSON itself, from the state's
"runs" (each with its "workflow", "id", "display_title", "created_at", "actor" and "jobs", as
the jobs API gives them), filtered as GitHub filters them; a rerun is appended to "reruns".
"""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    path = os.environ["FAKE_GH_STATE"]
    with open(path, encoding="utf-8") as fh:
        state = json.load(fh)
    args = argv[1:]
    if not args or args[0] != "api":
        print(f"fake gh: unsupported {args[:2]}", file=sys.stderr)
        return 2
    method = args[args.index("-X") + 1] if "-X" in args else "GET"
    route = next(a for a in args if a.startswith("repos/"))
    parts = route.split("/")
    fields = dict(a.split("=", 1) for a in args if "=" in a and not a.startswith("repos/"))
    out = ""
    if parts[3] == "actions":
        return actions(state, path, parts, method, fields)
    if parts[3] == "pulls" and len(parts) == 4:
        for pr in state["pulls"]:
            if "head" in fields and pr["head"] != fields["head"]:
                continue
            cols = [str(pr["number"]), pr["sha"]]
            if "updated_at" in args[-1]:
                cols.append(pr["updated_at"])
            out += "\t".join(cols) + "\n"
    elif parts[3] == "pulls":
        pr = next(p for p in state["pulls"] if str(p["number"]) == parts[4])
        if "mergeable" in args[-1]:
            merge = {True: "true", False: "false", None: ""}[pr.get("mergeable", True)]
            out = f"{merge}\t{pr['head'].split(':')[0]}\t{pr['updated_at']}\n"
        else:
            out = pr["sha"] + "\n"
    elif parts[3] == "issues" and parts[-1] == "comments" and method == "GET":
        for c in state["comments"]:
            if str(c["pr"]) == parts[4]:
                row = {
                    "id": c["id"],
                    "login": c["login"],
                    "body": c["body"],
                    "head": c["body"][:40],
                }
                out += json.dumps(row) + "\n"
    elif method == "POST":
        body = json.loads(sys.stdin.read())["body"]
        state["comments"].append(
            {"id": len(state["comments"]) + 1, "pr": int(parts[4]), "login": "github-actions[bot]",
             "body": body}
        )  # fmt: skip
    elif method == "PATCH":
        body = json.loads(sys.stdin.read())["body"]
        for c in state["comments"]:
            if str(c["id"]) == parts[-1]:
                c["body"] = body
    else:
        print(f"fake gh: unsupported {method} {route}", file=sys.stderr)
        return 2
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(state, fh)
    sys.stdout.write(out)
    return 0


def actions(state: dict, path: str, parts: list[str], method: str, fields: dict) -> int:
    """The Actions API: a workflow's runs, a run's jobs (every attempt), a rerun."""
    runs = state.setdefault("runs", [])
    if parts[4] == "workflows" and parts[-1] == "runs":
        since = fields.get("created", ">=").removeprefix(">=")
        listed = [
            {k: v for k, v in r.items() if k != "jobs"} | {"actor": {"login": r.get("actor", "")}}
            for r in runs
            if r["workflow"] == parts[5]
            and r["created_at"] >= since
            and fields.get("actor") in (None, r.get("actor"))
        ]
        sys.stdout.write(json.dumps({"total_count": len(listed), "workflow_runs": listed}))
        return 0
    run = next((r for r in runs if str(r["id"]) == parts[5]), None)
    if run is None:
        print(f"fake gh: no run {parts[5]} (HTTP 404)", file=sys.stderr)
        return 1
    if parts[-1] == "jobs":
        jobs = run.get("jobs", [])
        sys.stdout.write(json.dumps({"total_count": len(jobs), "jobs": jobs}))
        return 0
    if parts[-1] == "rerun" and method == "POST":
        state.setdefault("reruns", []).append(run["id"])
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(state, fh)
        return 0
    print(f"fake gh: unsupported {method} {'/'.join(parts)}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
