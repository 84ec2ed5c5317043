#!/usr/bin/env python3
"""degrau's WhatsApp channel from the command line.

  bind     bind a business number (its phone_number_id) to a tenant, in the table
  unbind   remove a number's binding (its events are then dropped)
  send     post a signed webhook delivery of a text message, as Meta does
  verify   run Meta's verification handshake against the webhook
  sent     list what the Graph API stand-in sent (the local stack's replies)
  sign     print the X-Hub-Signature-256 of the body on stdin

`bind` and `unbind` write the table with boto3 (AWS credentials as usual, or the
local stack: --endpoint "$(bash infra/moto.sh url)" and TABLE_NAME from
.local/provision.env). `send` signs the body with Python's hmac (HMAC-SHA256 under
the app secret, the X-Hub-Signature-256 header), independently of degrau's code.
The local stack's secrets are the defaults here and in infra/stack.sh.
"""
import argparse
import hashlib
import hmac
import json
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

LOCAL_API = "http://127.0.0.1:9000"
LOCAL_STANDIN = "http://127.0.0.1:4010"
LOCAL_APP_SECRET = "degrau-local-app-secret"
LOCAL_VERIFY_TOKEN = "degrau-local-verify-token"
DEFAULT_PHONE_NUMBER_ID = "100000000000001"
WEBHOOK_PATH = "/whatsapp/webhook"

PHONE_NUMBER_ID = re.compile(r"[0-9]{1,32}")
WA_ID = re.compile(r"[0-9]{1,20}")
TENANT = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def binding_key(phone_number_id):
    """The binding item's key, as the DynamoDB adapter lays it out (keys.rs)."""
    return {"pk": {"S": f"WA#{phone_number_id}"}, "sk": {"S": "BINDING"}}


def sign(secret, body):
    """The X-Hub-Signature-256 header value of `body` (bytes) under `secret`."""
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def text_delivery(phone_number_id, sender, text, message_id=None, name="Local"):
    """A webhook delivery of one text message, in the shape Meta posts."""
    return {
        "object": "whatsapp_business_account",
        "entry": [{
            "id": "0",
            "changes": [{
                "field": "messages",
                "value": {
                    "messaging_product": "whatsapp",
                    "metadata": {"display_phone_number": "15550000000",
                                 "phone_number_id": phone_number_id},
                    "contacts": [{"profile": {"name": name}, "wa_id": sender}],
                    "messages": [{
                        "from": sender,
                        "id": message_id or f"wamid.local.{uuid.uuid4().hex}",
                        "timestamp": str(int(time.time())),
                        "type": "text",
                        "text": {"body": text},
                    }],
                },
            }],
        }],
    }


def echo_delivery(phone_number_id, customer, text, message_id=None):
    """A webhook delivery of one echo: what the owner sent the customer from the
    WhatsApp Business app on a coexistence number (field `smb_message_echoes`)."""
    return {
        "object": "whatsapp_business_account",
        "entry": [{
            "id": "0",
            "changes": [{
                "field": "smb_message_echoes",
                "value": {
                    "messaging_product": "whatsapp",
                    "metadata": {"display_phone_number": "15550000000",
                                 "phone_number_id": phone_number_id},
                    "message_echoes": [{
                        "from": "15550000000",
                        "to": customer,
                        "id": message_id or f"wamid.local.{uuid.uuid4().hex}",
                        "timestamp": str(int(time.time())),
                        "type": "text",
                        "text": {"body": text},
                    }],
                },
            }],
        }],
    }


def dynamodb(args):
    import boto3  # the local stack's venv has it (infra/requirements.txt)
    kwargs = {"region_name": os.environ.get("AWS_REGION", "us-east-1")}
    if args.endpoint:
        kwargs["endpoint_url"] = args.endpoint
        kwargs.setdefault("aws_access_key_id", os.environ.get("AWS_ACCESS_KEY_ID", "local"))
        kwargs.setdefault("aws_secret_access_key",
                          os.environ.get("AWS_SECRET_ACCESS_KEY", "local"))
    return boto3.client("dynamodb", **kwargs)


def check(pattern, value, what):
    if not pattern.fullmatch(value or ""):
        sys.exit(f"whatsapp: {what} {value!r} is not valid ({pattern.pattern})")


def cmd_bind(args):
    check(PHONE_NUMBER_ID, args.phone_number_id, "--phone-number-id")
    check(TENANT, args.tenant, "--tenant")
    item = binding_key(args.phone_number_id)
    item["phone_number_id"] = {"S": args.phone_number_id}
    item["tenant"] = {"S": args.tenant}
    dynamodb(args).put_item(TableName=args.table, Item=item)
    print(f"whatsapp: {args.phone_number_id} is bound to tenant {args.tenant}")


def cmd_unbind(args):
    check(PHONE_NUMBER_ID, args.phone_number_id, "--phone-number-id")
    dynamodb(args).delete_item(TableName=args.table, Key=binding_key(args.phone_number_id))
    print(f"whatsapp: {args.phone_number_id} is bound to no tenant")


def post(url, body, headers, timeout=30):
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")
    except urllib.error.URLError as error:
        sys.exit(f"whatsapp: {url}: {error.reason} (is the local stack up? infra/stack.sh start)")


def cmd_send(args):
    check(PHONE_NUMBER_ID, args.phone_number_id, "--phone-number-id")
    check(WA_ID, args.sender, "--from" if args.command == "send" else "--to")
    if not args.text.strip():
        sys.exit("whatsapp: --text is empty")
    delivery = text_delivery if args.command == "send" else echo_delivery
    body = json.dumps(delivery(args.phone_number_id, args.sender, args.text,
                               args.message_id)).encode()
    headers = {"content-type": "application/json"}
    if not args.unsigned:
        headers["x-hub-signature-256"] = sign(args.app_secret, body)
    status, text = post(args.api.rstrip("/") + WEBHOOK_PATH, body, headers)
    print(f"{status} {text}")
    return 0 if 200 <= status < 300 else 1


def cmd_verify(args):
    query = urllib.parse.urlencode({"hub.mode": "subscribe",
                                    "hub.verify_token": args.verify_token,
                                    "hub.challenge": args.challenge})
    url = f"{args.api.rstrip('/')}{WEBHOOK_PATH}?{query}"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read().decode(errors="replace")
    except urllib.error.URLError as error:
        sys.exit(f"whatsapp: {url}: {error.reason} (is the local stack up? infra/stack.sh start)")
    print(f"{status} {text}")
    return 0 if status == 200 and text == args.challenge else 1


def cmd_sent(args):
    with urllib.request.urlopen(args.standin.rstrip("/") + "/stand-in/graph/sent",
                                timeout=10) as response:
        sent = json.loads(response.read())
    for message in sent:
        print(f"{message['phone_number_id']} -> {message['to']} [{message['type']}] "
              f"{message['content']}")
    return 0


def cmd_sign(args):
    print(sign(args.app_secret, sys.stdin.buffer.read()))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:]))
    sub = parser.add_subparsers(dest="command", required=True)

    for name, help_text in (("bind", "bind a number to a tenant"),
                            ("unbind", "remove a number's binding")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--phone-number-id", required=True)
        if name == "bind":
            p.add_argument("--tenant", required=True)
        p.add_argument("--table", default=os.environ.get("TABLE_NAME"),
                       required=not os.environ.get("TABLE_NAME"),
                       help="the table (default: $TABLE_NAME)")
        p.add_argument("--endpoint", default=os.environ.get("AWS_ENDPOINT_URL"),
                       help="a DynamoDB endpoint such as moto's (default: $AWS_ENDPOINT_URL)")

    p = sub.add_parser("send", help="post a signed text delivery to the webhook")
    p.add_argument("--from", dest="sender", required=True, help="the customer's wa_id (digits)")
    p.add_argument("--text", required=True)
    p.add_argument("--phone-number-id", default=DEFAULT_PHONE_NUMBER_ID)
    p.add_argument("--message-id", help="the wamid (default: a new one; repeat one to redeliver)")
    p.add_argument("--api", default=os.environ.get("DEGRAU_API", LOCAL_API))
    p.add_argument("--app-secret", default=os.environ.get("WHATSAPP_APP_SECRET", LOCAL_APP_SECRET))
    p.add_argument("--unsigned", action="store_true", help="send no signature (expect 401)")

    p = sub.add_parser("echo", help="post a signed echo: the owner answering from the business app")
    p.add_argument("--to", dest="sender", required=True, help="the customer's wa_id (digits)")
    p.add_argument("--text", required=True)
    p.add_argument("--phone-number-id", default=DEFAULT_PHONE_NUMBER_ID)
    p.add_argument("--message-id", help="the wamid (default: a new one)")
    p.add_argument("--api", default=os.environ.get("DEGRAU_API", LOCAL_API))
    p.add_argument("--app-secret", default=os.environ.get("WHATSAPP_APP_SECRET", LOCAL_APP_SECRET))
    p.add_argument("--unsigned", action="store_true", help="send no signature (expect 401)")

    p = sub.add_parser("verify", help="run the verification handshake")
    p.add_argument("--api", default=os.environ.get("DEGRAU_API", LOCAL_API))
    p.add_argument("--verify-token",
                   default=os.environ.get("WHATSAPP_VERIFY_TOKEN", LOCAL_VERIFY_TOKEN))
    p.add_argument("--challenge", default="1158201444")

    p = sub.add_parser("sent", help="what the Graph API stand-in sent")
    p.add_argument("--standin", default=os.environ.get("DEGRAU_STANDIN", LOCAL_STANDIN))

    p = sub.add_parser("sign", help="print the signature header of the body on stdin")
    p.add_argument("--app-secret", default=os.environ.get("WHATSAPP_APP_SECRET", LOCAL_APP_SECRET))

    args = parser.parse_args(argv)
    return {"bind": cmd_bind, "unbind": cmd_unbind, "send": cmd_send, "echo": cmd_send,
            "verify": cmd_verify, "sent": cmd_sent, "sign": cmd_sign}[args.command](args) or 0


if __name__ == "__main__":
    sys.exit(main())
