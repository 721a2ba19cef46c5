"""An encrypted, TLS-only SNS topic for alarms and build failures, with e-mail subscriptions.

Who may publish is granted explicitly, never to a bare service principal:
- CloudWatch alarms (`allow_alarms`): an `AWS::SNS::TopicPolicy` replaces SNS's default policy, so
  without an allow CloudWatch gets "not authorized to perform SNS:Publish"
  (aws-solutions/automated-security-response-on-aws#43). The topic policy and the key policy allow
  `cloudwatch.amazonaws.com` with aws:SourceAccount = this account and aws:SourceArn = the named alarms
  (confused-deputy protection); an encrypted topic needs the key to allow the publishing service
  `kms:GenerateDataKey*` and `kms:Decrypt` (SNS "Enable compatibility between event sources from AWS
  services and encrypted topics"), and an AWS-managed alias/aws/sns key cannot grant it
  (../shared/README.md, "CloudWatch alarms -> SNS").
- EventBridge rules (`rule_target`): through a role per rule that EventBridge may assume only for rules
  of this account (trust conditioned on aws:SourceAccount and aws:SourceArn), which may publish to this
  topic and use its key.
  No `events.amazonaws.com` statement goes on the topic or the key: SNS documents that aws:SourceAccount /
  aws:SourceArn are not supported in a KMS key policy for EventBridge-to-encrypted-topic delivery (quoted
  in awslabs/landing-zone-accelerator-on-aws#407), so a key statement could not be scoped.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from triton_cdk.guard import restrict_grants_to_aws_services
from triton_cdk.nag import acknowledge

__all__ = ["CLOUDWATCH", "EVENTS", "KEY_ACTIONS", "NotificationTopic", "alarm_arn", "rule_target"]

CLOUDWATCH = "cloudwatch.amazonaws.com"
EVENTS = "events.amazonaws.com"
KEY_ACTIONS = ["kms:Decrypt", "kms:GenerateDataKey*"]


def alarm_arn(scope: Construct, alarm_name: str) -> str:
    """arn:<partition>:cloudwatch:<region>:<account>:alarm:<name> (IAM resource type `alarm`)."""
    return cdk.Stack.of(scope).format_arn(
        service="cloudwatch",
        resource="alarm",
        resource_name=alarm_name,
        arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
    )


class NotificationTopic(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, emails: Sequence[str] = ()) -> None:
        super().__init__(scope, construct_id)
        # Its own key: the topic holds no data at rest, and a key policy edit here must not
        # touch the stateful artifact key in another stack.
        self.key = kms.Key(
            self,
            "Key",
            description="Encrypts the Triton notification topic",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.DESTROY,
            pending_window=cdk.Duration.days(7),
        )
        restrict_grants_to_aws_services(self.key)  # CT.KMS.PR.3 (triton_cdk/guard.py)
        self.topic = sns.Topic(self, "Topic", master_key=self.key, enforce_ssl=True)
        for email in emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
        self._alarm_names: list[list[str]] = []  # one list per allow_alarms call

    def allow_alarms(self, alarm_names: Sequence[str]) -> None:
        """Let these CloudWatch alarms (of this stack's account and region) publish to the topic.

        Each call adds one topic-policy and one key-policy statement naming exactly these alarms.
        """
        names = sorted(set(alarm_names))
        if not names:
            return
        suffix = str(len(self._alarm_names)) if self._alarm_names else ""
        self._alarm_names.append(names)
        conditions = {
            "StringEquals": {"aws:SourceAccount": cdk.Stack.of(self).account},
            "ArnLike": {"aws:SourceArn": [alarm_arn(self, name) for name in names]},
        }
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid=f"AllowAlarmsToPublish{suffix}",
                principals=[iam.ServicePrincipal(CLOUDWATCH)],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions=conditions,
            )
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid=f"AllowAlarmsToUseTheKey{suffix}",
                principals=[iam.ServicePrincipal(CLOUDWATCH)],
                actions=KEY_ACTIONS,
                resources=["*"],  # in a key policy "*" means this key
                conditions=conditions,
            )
        )

    @property
    def alarm_names(self) -> list[str]:
        """Every alarm allowed to publish."""
        return [name for names in self._alarm_names for name in names]


def rule_target(rule: events.Rule, topic: sns.ITopic, *, message: events.RuleTargetInput) -> targets.SnsTopic:
    """An SNS target for `rule` that publishes through its own role, assumable by this account's rules only.

    The role gets sns:Publish on the topic and, through `grant_publish`, the key's Decrypt /
    GenerateDataKey* (identity policy; the key's policy trusts the account). See the module doc.
    """
    stack = cdk.Stack.of(rule)
    role = iam.Role(
        rule,
        "PublishRole",
        description="EventBridge publishes this rule's events to its SNS topic",
        assumed_by=iam.ServicePrincipal(
            EVENTS,
            conditions={
                "StringEquals": {"aws:SourceAccount": stack.account},
                # This account's rules: the rule's own ARN would make the rule and its role refer to each
                # other (a circular dependency), and its name is generated.
                "ArnLike": {"aws:SourceArn": stack.format_arn(service="events", resource="rule", resource_name="*")},
            },
        ),
    )
    acknowledge(
        role,
        "AwsSolutions-IAM5",
        "kms:GenerateDataKey* is what Topic.grant_publish gives for the topic's own key (SNS generates data "
        "keys per message); the key is the topic's alone.",
        applies_to=["Action::kms:GenerateDataKey*"],
    )
    return targets.SnsTopic(topic, message=message, authorize_using_role=True, role=role)
