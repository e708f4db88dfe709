#!/usr/bin/env python3
"""A stand-in `gh` for the workflow tests: the few GitHub API calls the grader's verbs make,
answered from a JSON state file ($FAKE_GH_STATE) that also records every comment posted.

    gh api [--paginate] [-X GET] repos/R/pulls -f state=open [-f head=OWNER:BRANCH] --jq Q
    gh api repos/R/pulls/N --jq .head.sha        (or the sweep's [.mergeable, owner, updated_at])
    gh api --paginate repos/R/issues/N/comments --jq Q
    gh api -X POST repos/R/issues/N/comments --input -       (body on stdin)
    gh api -X PATCH repos/R/issues/comments/ID --input -

The --jq programs are not run: each endpoint prints what the grader's own query asks for.
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


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
