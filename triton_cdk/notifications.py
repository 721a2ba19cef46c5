"""An encrypted, TLS-only SNS topic for alarms and build failures, with e-mail subscriptions."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

# Services that publish to the topic and therefore must use its key (an AWS-managed SNS key
# cannot be used by CloudWatch alarms or EventBridge).
PUBLISHING_SERVICES = ("cloudwatch.amazonaws.com", "events.amazonaws.com")


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
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowPublishingServices",
                principals=[iam.ServicePrincipal(service) for service in PUBLISHING_SERVICES],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy "*" means this key
            )
        )
        self.topic = sns.Topic(self, "Topic", master_key=self.key, enforce_ssl=True)
        for email in emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
